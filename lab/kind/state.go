package kind

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/svclab/svclab/lab/cluster"
)

// State is what svclab records about one of its kind clusters.
type State struct {
	Name string `json:"name"`
	// Shape is the kind-configs shape or the configuration file used.
	Shape string `json:"shape"`
	// Proxier is the bundled proxier's mode; "" for kind's kube-proxy.
	Proxier string `json:"proxier,omitempty"`
	// ProxierImage is the bundled proxier's image reference.
	ProxierImage string `json:"proxierImage,omitempty"`
	// NodeImage is the nodes' image; SvclabNode says it is svclab's own.
	NodeImage  string `json:"nodeImage,omitempty"`
	SvclabNode bool   `json:"svclabNode,omitempty"`
	// NodeLabels are the labels the configuration gives each node.
	NodeLabels map[string]map[string]string `json:"nodeLabels,omitempty"`
	Created    time.Time                    `json:"created"`
	// Creator is the process creating the cluster; 0 once it is complete.
	Creator  int  `json:"creator,omitempty"`
	Complete bool `json:"complete"`
}

type paths struct{ dir string }

func (p paths) state() string      { return filepath.Join(p.dir, "cluster.json") }
func (p paths) config() string     { return filepath.Join(p.dir, "kind-config.yaml") }
func (p paths) kubeconfig() string { return filepath.Join(p.dir, "kubeconfig") }

// controlKey is the private key of the bundled proxiers' teaching hooks
// (package control): svclab's alone, never in the cluster.
func (p paths) controlKey() string { return filepath.Join(p.dir, "proxier-control.key") }

func loadState(p paths) (*State, error) {
	data, err := os.ReadFile(p.state())
	if errors.Is(err, os.ErrNotExist) {
		return nil, cluster.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("%s is damaged: %w", p.state(), err)
	}
	return &st, nil
}

func (st *State) save(p paths) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := p.state() + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p.state())
}

// creating says whether the cluster's creator is still at work.
func (st *State) creating() bool {
	return !st.Complete && st.Creator > 0 && alive(st.Creator)
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

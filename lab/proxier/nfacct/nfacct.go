package nfacct

import (
	"errors"
	"fmt"
)

// The counters kube-proxy's iptables proxier uses.
const (
	// CTStateInvalidDropped counts packets dropped as conntrack INVALID
	// (kubeproxy_iptables_ct_state_invalid_dropped_packets_total).
	CTStateInvalidDropped = "ct_state_invalid_dropped_pkts"
	// LocalhostNodePortsAccepted counts packets accepted on localhost
	// NodePorts (kubeproxy_iptables_localhost_nodeports_accepted_packets_total).
	LocalhostNodePortsAccepted = "localhost_nps_accepted_pkts"
)

// Counters are the counters kube-proxy ensures, in its order.
var Counters = []string{CTStateInvalidDropped, LocalhostNodePortsAccepted}

// MaxLength is the longest counter name the kernel takes.
const MaxLength = 31

// Errors, as upstream's.
var (
	ErrObjectNotFound       = errors.New("object not found")
	ErrNameExceedsMaxLength = fmt.Errorf("object name exceeds the maximum allowed length of %d characters", MaxLength)
	ErrEmptyName            = errors.New("object name cannot be empty")
	ErrNotSupported         = errors.New("nfacct sub-system not available")
)

// Counter is one nfacct object.
type Counter struct {
	Name    string
	Packets uint64
	Bytes   uint64
}

// Interface creates and reads counters.
type Interface interface {
	// Ensure creates the counter unless it exists.
	Ensure(name string) error
	// Get reads a counter (ErrObjectNotFound if it does not exist).
	Get(name string) (*Counter, error)
}

func checkName(name string) error {
	switch {
	case name == "":
		return ErrEmptyName
	case len(name) > MaxLength:
		return ErrNameExceedsMaxLength
	}
	return nil
}

package faults

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	kubeproxyconfig "k8s.io/kube-proxy/config/v1alpha1"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/proxier/config"
	"github.com/svclab/svclab/lab/proxier/deploy"
	"github.com/svclab/svclab/lab/proxierctl"
	"github.com/svclab/svclab/lab/scenario"
)

// kubeProxyConfig edits config.conf in the kube-proxy ConfigMap, as a
// kubeadm cluster keeps it, and restarts the kube-proxy Pods so that they
// read it. It returns once every node's proxier runs the new
// configuration, or, for one that cannot run (mode ipvs on this kernel),
// once every new Pod has exited. The session's guard puts the ConfigMap
// back when the scenario ends.
type kubeProxyConfig struct{ scenario.FaultSpec }

// modeBlank is the mode parameter that writes mode: "".
const modeBlank = "blank"

// kubeProxyRestartTimeout bounds the wait for the restarted proxiers.
const kubeProxyRestartTimeout = 2 * time.Minute

func (f kubeProxyConfig) Inject(ctx context.Context, c cluster.Cluster, p scenario.Params) error {
	edit, err := f.params(p)
	if err != nil {
		return err
	}
	return editKubeProxy(ctx, c, edit)
}

// SetProxyMode puts kube-proxy in mode (nftables or iptables) as a
// cluster's operator would: mode in the kube-proxy ConfigMap, the
// kube-proxy Pods restarted. It returns once every node's proxier runs in
// mode. A scenario's set-up uses it when the cluster runs the other mode;
// the session's guard puts the cluster's own mode back when the scenario
// ends.
func SetProxyMode(ctx context.Context, c cluster.Cluster, mode string) error {
	switch mode {
	case scenario.ProxyModeNFTables, scenario.ProxyModeIPTables:
	default:
		return fmt.Errorf("proxy mode %q: give %s or %s", mode, scenario.ProxyModeNFTables, scenario.ProxyModeIPTables)
	}
	return editKubeProxy(ctx, c, kubeProxyEdit{mode: mode})
}

// editKubeProxy writes edit into the kube-proxy ConfigMap and restarts
// kube-proxy (restartKubeProxy).
func editKubeProxy(ctx context.Context, c cluster.Cluster, edit kubeProxyEdit) error {
	cs, err := c.Client()
	if err != nil {
		return err
	}
	var want string // the mode the proxiers run in ("" when they cannot run)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cs.CoreV1().ConfigMaps(deploy.Namespace).Get(ctx, deploy.Name, metav1.GetOptions{})
		if err != nil {
			return getErr("ConfigMap", deploy.Namespace, deploy.Name, err)
		}
		cfg, err := config.Load([]byte(cm.Data[deploy.ConfigMapKey]))
		if err != nil {
			return fmt.Errorf("%s of ConfigMap %s/%s: %w", deploy.ConfigMapKey, deploy.Namespace, deploy.Name, err)
		}
		if want, err = editKubeProxyConfig(cfg, edit); err != nil {
			return err
		}
		text, err := config.Marshal(cfg)
		if err != nil {
			return fmt.Errorf("encoding %s: %w", deploy.ConfigMapKey, err)
		}
		cm.Data[deploy.ConfigMapKey] = string(text)
		_, err = cs.CoreV1().ConfigMaps(deploy.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
		if err != nil && !apierrors.IsConflict(err) {
			return fmt.Errorf("updating ConfigMap %s/%s: %w", deploy.Namespace, deploy.Name, err)
		}
		return err
	})
	if err != nil {
		return err
	}
	return restartKubeProxy(ctx, c, cs, want)
}

// kubeProxyEdit is what the fault changes in config.conf (zero values:
// nothing).
type kubeProxyEdit struct {
	// mode: modeBlank writes mode: "".
	mode          string
	minSync, sync time.Duration
	// clusterCIDR: modeBlank removes it.
	clusterCIDR string
}

// params reads and checks the parameters: durations and CIDRs must parse.
func (f kubeProxyConfig) params(p scenario.Params) (e kubeProxyEdit, err error) {
	e.mode = p.String("mode", "")
	e.clusterCIDR = p.String("clusterCIDR", "")
	if e.clusterCIDR != "" && e.clusterCIDR != modeBlank {
		if _, err := netip.ParsePrefix(e.clusterCIDR); err != nil {
			return e, fmt.Errorf("clusterCIDR: %q is not a CIDR such as 10.244.0.0/16", e.clusterCIDR)
		}
	}
	parse := func(name string) (time.Duration, error) {
		s := p.String(name, "")
		if s == "" {
			return 0, nil
		}
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return 0, fmt.Errorf("%s: %q is not a positive duration such as 10m", name, s)
		}
		return d, nil
	}
	if e.minSync, err = parse("minSyncPeriod"); err != nil {
		return e, err
	}
	if e.sync, err = parse("syncPeriod"); err != nil {
		return e, err
	}
	if e == (kubeProxyEdit{}) {
		return e, fmt.Errorf("%s needs mode, minSyncPeriod, syncPeriod or clusterCIDR", f.Name())
	}
	return e, nil
}

// editKubeProxyConfig applies the fault's changes to cfg: the mode
// ("blank" writes mode: ""), then the periods of the section the mode reads
// (iptables for a blank mode, as kube-proxy on Linux), then clusterCIDR
// ("blank" removes it). It returns the mode the proxier will run in, or ""
// for a configuration it cannot run (ipvs); a configuration the proxier
// would refuse is the scenario's error.
func editKubeProxyConfig(cfg *kubeproxyconfig.KubeProxyConfiguration, e kubeProxyEdit) (string, error) {
	switch e.mode {
	case "":
	case modeBlank:
		cfg.Mode = ""
	default:
		cfg.Mode = kubeproxyconfig.ProxyMode(e.mode)
	}
	switch e.clusterCIDR {
	case "":
	case modeBlank:
		cfg.ClusterCIDR = ""
	default:
		cfg.ClusterCIDR = e.clusterCIDR
	}
	minSync, sync := e.minSync, e.sync
	var minP, syncP *metav1.Duration
	switch string(cfg.Mode) {
	case config.ModeNFTables:
		minP, syncP = &cfg.NFTables.MinSyncPeriod, &cfg.NFTables.SyncPeriod
	case config.ModeIPVS:
		minP, syncP = &cfg.IPVS.MinSyncPeriod, &cfg.IPVS.SyncPeriod
	default:
		minP, syncP = &cfg.IPTables.MinSyncPeriod, &cfg.IPTables.SyncPeriod
	}
	if minSync != 0 {
		*minP = metav1.Duration{Duration: minSync}
	}
	if sync != 0 {
		*syncP = metav1.Duration{Duration: sync}
	}
	check := cfg.DeepCopy()
	config.SetDefaults(check)
	r, err := config.Resolve(check)
	if err != nil {
		return "", fmt.Errorf("kube-proxy would refuse the configuration the fault writes: %w", err)
	}
	if r.Mode == config.ModeIPVS {
		return "", nil
	}
	return r.Mode, nil
}

// restartKubeProxy deletes the kube-proxy Pods and waits until every node
// runs a new one in mode want; with want "", until every new one has
// exited at least once (a proxier that cannot start).
func restartKubeProxy(ctx context.Context, c cluster.Cluster, cs kubernetes.Interface, want string) error {
	old, err := cs.CoreV1().Pods(deploy.Namespace).List(ctx, metav1.ListOptions{LabelSelector: deploy.Selector})
	if err != nil {
		return fmt.Errorf("listing the kube-proxy Pods: %w", err)
	}
	gone := map[string]bool{}
	zero := int64(0)
	for _, pod := range old.Items {
		gone[pod.Name] = true
		if err := cs.CoreV1().Pods(deploy.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("restarting kube-proxy Pod %s: %w", pod.Name, err)
		}
	}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return fmt.Errorf("listing the nodes of cluster %s: %w", c.Name(), err)
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, time.Second, kubeProxyRestartTimeout, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(deploy.Namespace).List(ctx, metav1.ListOptions{LabelSelector: deploy.Selector})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		byNode := map[string]*corev1.Pod{}
		for i := range pods.Items {
			if pod := &pods.Items[i]; !gone[pod.Name] && pod.DeletionTimestamp == nil {
				byNode[pod.Spec.NodeName] = pod
			}
		}
		for _, n := range nodes {
			pod := byNode[n.Name]
			if pod == nil {
				last = "no new kube-proxy Pod on node " + n.Name
				return false, nil
			}
			if want == "" {
				if !exitedOnce(pod) {
					last = "kube-proxy Pod " + pod.Name + " has not exited yet"
					return false, nil
				}
				continue
			}
			mode, err := proxierctl.Mode(ctx, c, n.Name)
			if err != nil || mode != want {
				last = fmt.Sprintf("node %s: mode %q, %v", n.Name, mode, err)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("kube-proxy did not restart with its new configuration within %s (%s): %w", kubeProxyRestartTimeout, last, err)
	}
	return nil
}

// exitedOnce tells whether pod's first container has terminated at least
// once.
func exitedOnce(pod *corev1.Pod) bool {
	for _, st := range pod.Status.ContainerStatuses {
		if st.RestartCount > 0 || st.State.Terminated != nil || st.LastTerminationState.Terminated != nil {
			return true
		}
	}
	return false
}

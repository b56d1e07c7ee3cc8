// Command svclab-kube is a multi-call binary holding the real Kubernetes
// components svclab's embedded backend runs: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kubectl, upstream kube-proxy and
// CoreDNS, all built from their published Go modules — and the node
// components of the kind backend's offline node image: kubelet, kubeadm,
// kindnetd (svclab's own, see internal/kindnetd) and pause.
//
// Call it as "svclab-kube COMPONENT [flags]", or through a symlink named after
// the component (like busybox).
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	_ "time/tzdata" // for timeZone support in CronJob

	"github.com/coredns/coredns/coremain"
	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/component-base/version"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubeadm "k8s.io/kubernetes/cmd/kubeadm/app"
	kubeadmerrors "k8s.io/kubernetes/cmd/kubeadm/app/util/errors"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"

	_ "github.com/svclab/svclab/lab/kube/internal/corednsplugins"
	"github.com/svclab/svclab/lab/kube/internal/kindnetd"
	"github.com/svclab/svclab/lab/kube/internal/pause"
)

var components = map[string]func(args []string) int{
	"etcd": func(args []string) int {
		etcdmain.Main(append([]string{"etcd"}, args...))
		return 0
	},
	"kube-apiserver": func(args []string) int {
		return cli.Run(withArgs(apiserver.NewAPIServerCommand(), args))
	},
	"kube-controller-manager": func(args []string) int {
		return cli.Run(withArgs(controllermanager.NewControllerManagerCommand(), args))
	},
	"kube-scheduler": func(args []string) int {
		return cli.Run(withArgs(scheduler.NewSchedulerCommand(), args))
	},
	"kube-proxy": func(args []string) int {
		return cli.Run(withArgs(proxy.NewProxyCommand(), args))
	},
	"kubelet": func(args []string) int {
		return cli.Run(withArgs(kubelet.NewKubeletCommand(context.Background()), args))
	},
	"kubeadm": func(args []string) int {
		// kubeadm reads os.Args through the global flag sets.
		os.Args = append([]string{"kubeadm"}, args...)
		kubeadmerrors.HandleError(kubeadm.Run())
		return 0
	},
	"kindnetd": func(args []string) int {
		return kindnetd.Main(args)
	},
	"pause": pause.Main,
	"kubectl": func(args []string) int {
		os.Args = append([]string{"kubectl"}, args...)
		logs.GlogSetter(kubectlcmd.GetLogVerbosity(os.Args)) //nolint:errcheck
		command := kubectlcmd.NewDefaultKubectlCommand()
		if err := cli.RunNoErrOutput(command); err != nil {
			kubectlutil.CheckErr(err)
		}
		return 0
	},
	"coredns": func(args []string) int {
		os.Args = append([]string{"coredns"}, args...)
		coremain.Run()
		return 0
	},
	"version": func([]string) int {
		fmt.Println(version.Get().GitVersion)
		return 0
	},
}

func main() {
	name := filepath.Base(os.Args[0])
	args := os.Args[1:]
	if _, ok := components[name]; !ok {
		if len(args) == 0 {
			usage()
			os.Exit(2)
		}
		name, args = args[0], args[1:]
	}
	run, ok := components[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "svclab-kube: unknown component %q\n", name)
		usage()
		os.Exit(2)
	}
	os.Exit(run(args))
}

// withArgs makes a cobra command parse args rather than os.Args.
func withArgs(cmd *cobra.Command, args []string) *cobra.Command {
	cmd.SetArgs(args)
	return cmd
}

func usage() {
	names := make([]string, 0, len(components))
	for n := range components {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(os.Stderr, "usage: svclab-kube COMPONENT [flags]\ncomponents: %v\n", names)
}

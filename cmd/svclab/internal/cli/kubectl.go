package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/lab/cluster"
	"github.com/svclab/svclab/lab/kubebin"
)

func newKubectlCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "kubectl [--name NAME] [--state-dir DIR] KUBECTL-ARGS...",
		Short: "Run kubectl " + cluster.KubernetesVersion + " against a lab cluster (default --name lab)",
		// kubectl's own flags pass through untouched.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			name, args, err := splitNameFlag(args, e)
			if err != nil {
				return err
			}
			c, err := e.findCluster(cmd.Context(), name)
			if err != nil {
				return err
			}
			kp, ok := c.(interface{ KubeconfigPath() string })
			if !ok {
				return fmt.Errorf("cluster %s has no kubeconfig file", name)
			}
			bin, err := kubebin.Locate(cmd.Context(), cluster.NewTextProgress(e.errOut))
			if err != nil {
				return err
			}
			x := exec.CommandContext(cmd.Context(), bin, append([]string{"kubectl"}, args...)...)
			x.Env = append(os.Environ(), "KUBECONFIG="+kp.KubeconfigPath())
			x.Stdin, x.Stdout, x.Stderr = os.Stdin, e.out, e.errOut
			if err := x.Run(); err != nil {
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					return &ExitError{Code: ee.ExitCode()}
				}
				return err
			}
			return nil
		},
	}
}

// splitNameFlag takes svclab's own leading flags (--name, --state-dir, in
// either order, as "--flag value" or "--flag=value") off args; the rest is
// kubectl's.
func splitNameFlag(args []string, e *env) (string, []string, error) {
	name := "lab"
	for len(args) > 0 {
		flag, value, hasValue := strings.Cut(args[0], "=")
		var dst *string
		switch flag {
		case "--name":
			dst = &name
		case "--state-dir":
			dst = &e.stateDir
		default:
			return name, args, nil
		}
		if !hasValue {
			if len(args) < 2 {
				return "", nil, fmt.Errorf("%s needs a value", flag)
			}
			value, args = args[1], args[1:]
		}
		*dst = value
		args = args[1:]
	}
	return name, args, nil
}

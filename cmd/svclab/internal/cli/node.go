package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/svclab/svclab/lab/cluster"
)

func newNodeCommand(e *env) *cobra.Command {
	var name string
	var tty bool
	c := &cobra.Command{
		Use:   "node",
		Short: "Run commands on a cluster's nodes (in the node's network namespace and filesystem)",
	}
	c.PersistentFlags().StringVar(&name, "name", "lab", "cluster name")
	run := func(cmd *cobra.Command, node string, argv []string, withTTY bool) error {
		cl, err := e.findCluster(cmd.Context(), name)
		if err != nil {
			return err
		}
		if withTTY {
			err = runOnTerminal(cmd.Context(), cl, node, argv, os.Stdin, e.out)
		} else {
			// The node command gets the standard streams' contents, never
			// the terminal itself (the backend relays it).
			err = cl.NodeExec(cmd.Context(), node, argv, cluster.Stdio{Stdin: os.Stdin, Stdout: e.out, Stderr: e.errOut})
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return &ExitError{Code: exitCode(ee)}
		}
		return err
	}
	execCmd := &cobra.Command{
		Use:     "exec NODE -- COMMAND [ARGS...]",
		Short:   "Run a command on a node, e.g. svclab node exec lab-worker -- nft list table ip kube-proxy",
		Args:    cobra.MinimumNArgs(2),
		Example: "  svclab node exec lab-worker -- conntrack -L -p udp\n  svclab node exec -t lab-worker -- top",
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd, args[0], args[1:], tty)
		},
	}
	execCmd.Flags().BoolVarP(&tty, "tty", "t", false, "run the command behind a terminal (for full-screen programs such as top); needs one")
	c.AddCommand(execCmd, &cobra.Command{
		Use:   "shell NODE",
		Short: "Open a root shell on a node",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd, args[0], []string{"bash", "-l"}, true)
		},
	})
	return c
}

// runOnTerminal runs argv on node behind a terminal of svclab's (the
// backend's NodeTerminal), relaying the caller's terminal in to it and
// its output back, as `docker exec -it` does: the caller's terminal is put
// in raw mode (keys such as Ctrl-C go to the node) and restored at the
// end, and its size follows the caller's window. The node's processes
// never get the caller's terminal itself.
func runOnTerminal(ctx context.Context, cl cluster.Cluster, node string, argv []string, in *os.File, out io.Writer) error {
	fd := int(in.Fd())
	if !term.IsTerminal(fd) {
		return fmt.Errorf("a shell on a node needs a terminal; use 'svclab node exec %s -- COMMAND' otherwise", node)
	}
	tc, ok := cl.(cluster.NodeTerminaler)
	if !ok {
		return fmt.Errorf("cluster %s cannot open a terminal on its nodes; use 'svclab node exec %s -- COMMAND'", cl.Name(), node)
	}
	size := cluster.TerminalSize{Rows: 24, Cols: 80}
	if w, h, err := term.GetSize(fd); err == nil {
		size = cluster.TerminalSize{Rows: uint16(h), Cols: uint16(w)}
	}
	if v := os.Getenv("TERM"); v != "" {
		// The node's programs draw for the caller's terminal.
		argv = append([]string{"env", "TERM=" + v}, argv...)
	}
	t, err := tc.NodeTerminal(ctx, node, argv, size)
	if err != nil {
		return err
	}
	defer t.Close()
	state, err := term.MakeRaw(fd)
	if err != nil {
		return fmt.Errorf("putting the terminal in raw mode: %w", err)
	}
	defer term.Restore(fd, state)
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-done:
				return
			case <-winch:
				if w, h, err := term.GetSize(fd); err == nil {
					t.Resize(cluster.TerminalSize{Rows: uint16(h), Cols: uint16(w)})
				}
			}
		}
	}()
	// The copy of the input may stay blocked reading the caller's
	// terminal after the command ends; svclab exits then.
	go io.Copy(t, in)
	io.Copy(out, t)
	return t.Wait()
}

// exitCode is the exit code a shell would give for a command that ended
// so: its exit status, or 128 and the signal that ended it.
func exitCode(ee *exec.ExitError) int {
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}

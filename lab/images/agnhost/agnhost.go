package agnhost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Version is what "agnhost --version" prints: the upstream version whose
// behaviour this implementation follows.
const Version = "2.53 (svclab)"

// env is what a subcommand needs from its process; tests replace it to
// run servers on loopback in goroutines.
type env struct {
	stdout, stderr io.Writer
	// notify returns a channel that receives the given signals. Only the
	// subcommands that handle signals upstream ask for them; the others
	// die of them, as upstream.
	notify   func(sigs ...os.Signal) <-chan os.Signal
	hostname func() (string, error)
	environ  func() []string
	now      func() time.Time
	// bindHost is the address servers listen on: "" (all) in pods.
	bindHost string
	// ready, when set, is told each server's bound address ("http",
	// "udp", "tcp", "tls").
	ready func(kind string, addr net.Addr)
	// Files and directories the subcommands use.
	resolvConf, hostsFile, uploadDir, webRoot, shell string
	// livenessPort is where liveness listens (8080, fixed upstream).
	livenessPort int
	// awaitDeletion is how long serve-hostname keeps serving after
	// SIGTERM (60s upstream).
	awaitDeletion time.Duration
}

func processEnv() env {
	return env{
		stdout: os.Stdout, stderr: os.Stderr,
		notify: func(sigs ...os.Signal) <-chan os.Signal {
			c := make(chan os.Signal, 1)
			signal.Notify(c, sigs...)
			return c
		},
		hostname:   os.Hostname,
		environ:    os.Environ,
		now:        time.Now,
		resolvConf: "/etc/resolv.conf", hostsFile: "/etc/hosts", uploadDir: "/uploads", webRoot: "/", shell: "/bin/sh",
		awaitDeletion: 60 * time.Second,
		livenessPort:  8080,
	}
}

// Main runs agnhost with args (without the program name: the subcommand
// first) and returns the exit code. The svclab binary calls it when it is
// run as /agnhost.
func Main(args []string) int {
	return run(context.Background(), processEnv(), args)
}

// exitError carries a subcommand's exit code through cobra.
type exitError struct{ code int }

func (e exitError) Error() string { return "exit status " + strconv.Itoa(e.code) }

// notImplemented are upstream subcommands this implementation lacks; they
// fail with a message that says so rather than "unknown command".
var notImplemented = []string{
	"audit-proxy", "crd-conversion-webhook", "entrypoint-tester", "fake-gitserver", "grpc-health-checking",
	"guestbook", "inclusterclient", "logs-generator", "mounttest", "net", "nettest", "no-snat-test",
	"no-snat-test-proxy", "podcertificatesigner", "port-forward-tester", "resource-consumer-controller",
	"tcp-reset", "webhook", "test-service-account-issuer-discovery",
}

func run(ctx context.Context, e env, args []string) int {
	logger := log.New(e.stderr, "", log.LstdFlags)
	root := &cobra.Command{
		Use:           "agnhost",
		Short:         "svclab's implementation of the Kubernetes e2e test image agnhost",
		Version:       Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetArgs(args)
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	// Upstream accepts klog's flags; scenarios copied from e2e tests pass
	// some of them.
	pf := root.PersistentFlags()
	pf.Int("v", 0, "log level (accepted for compatibility)")
	pf.String("vmodule", "", "accepted for compatibility")
	pf.Bool("logtostderr", true, "accepted for compatibility")
	pf.Bool("alsologtostderr", false, "accepted for compatibility")
	for _, n := range []string{"v", "vmodule", "logtostderr", "alsologtostderr"} {
		pf.MarkHidden(n)
	}

	root.AddCommand(
		netexecCommand(ctx, e, logger),
		serveHostnameCommand(ctx, e, logger),
		pauseCommand(ctx, e),
		porterCommand(ctx, e, logger),
		livenessCommand(ctx, e, logger),
		testWebserverCommand(ctx, e, logger),
		dnsSuffixCommand(e),
		dnsServerListCommand(e),
		etcHostsCommand(e),
		connectCommand(e),
		boomServerCommand(ctx, e, logger),
	)
	for _, name := range notImplemented {
		root.AddCommand(&cobra.Command{
			Use:                name,
			Hidden:             true,
			DisableFlagParsing: true,
			RunE: func(*cobra.Command, []string) error {
				return fmt.Errorf("subcommand %q of agnhost is not implemented in svclab's agnhost; it has: %s",
					name, strings.Join(implemented(root), ", "))
			},
		})
	}
	err := root.Execute()
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "Error: %v\n", err)
		return 1
	}
	return 0
}

func implemented(root *cobra.Command) []string {
	var out []string
	for _, c := range root.Commands() {
		if !c.Hidden && c.Name() != "help" && c.Name() != "completion" {
			out = append(out, c.Name())
		}
	}
	sort.Strings(out)
	return out
}

// listen opens a TCP listener on port and reports it.
func (e env) listen(kind string, port int) (net.Listener, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(e.bindHost, strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	if e.ready != nil {
		e.ready(kind, ln.Addr())
	}
	return ln, nil
}

// listenUDP opens a UDP socket on host:port and reports it.
func (e env) listenUDP(host string, port int) (*net.UDPConn, error) {
	if host == "" {
		host = e.bindHost
	}
	addr, err := net.ResolveUDPAddr("udp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	c, err := net.ListenUDP("udp", addr)
	if err != nil {
		return nil, err
	}
	if e.ready != nil {
		e.ready("udp", c.LocalAddr())
	}
	return c, nil
}

// fatal logs like log.Fatal and returns exit code 1.
func fatal(l *log.Logger, format string, args ...any) error {
	l.Printf(format, args...)
	return exitError{1}
}

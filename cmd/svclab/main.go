// Command svclab runs the lab: clusters, scenarios and the web UI.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/svclab/svclab/cmd/svclab/internal/cli"
	"github.com/svclab/svclab/lab/roles"
)

func main() {
	// First the binary's other programs, by argv[0], before any signal
	// handler is installed — one table, roles.Table:
	//
	//	svclab-runc                     the runc wrapper of svclab's Docker engine
	//	svclab-supervisor               an embedded cluster's supervisor
	//	svclab-node-agent               its nodes' agents
	//	svclab-load-balancer            its load balancer
	//	kube-proxy                      the proxier image's bundled kube-proxy
	//	agnhost, agnhost-2, pause       the agnhost image's programs
	//	nginx, httpd, httpd-foreground  the web image's server
	//
	// Called by any other name, svclab is the command line.
	roles.Dispatch()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		var coded interface{ ExitCode() int }
		if errors.As(err, &coded) {
			os.Exit(coded.ExitCode())
		}
		fmt.Fprintln(os.Stderr, "svclab:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	return cli.Execute(ctx, os.Stdout, os.Stderr)
}

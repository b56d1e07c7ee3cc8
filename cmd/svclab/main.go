// Command svclab runs the lab: clusters, scenarios and the web UI.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/svclab/svclab/lab/cli"
	"github.com/svclab/svclab/lab/embedded"
	"github.com/svclab/svclab/lab/kind/dockerd"
)

func main() {
	// svclab's dockerd runs its containers through the svclab binary
	// called svclab-runc where the capability bounding set needs it.
	if run, ok := dockerd.Applet(filepath.Base(os.Args[0])); ok {
		os.Exit(run(os.Args[1:]))
	}
	embedded.Init()
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

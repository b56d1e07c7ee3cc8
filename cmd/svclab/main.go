// Command svclab runs the lab: clusters, scenarios and the web UI.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/svclab/svclab/lab/cli"
	"github.com/svclab/svclab/lab/embedded"
)

func main() {
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
	return cli.NewRoot(os.Stdout, os.Stderr).ExecuteContext(ctx)
}

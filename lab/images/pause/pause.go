package pause

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Version is the pause.c version /pause -v reports.
const Version = "3.10.2"

// Main runs pause with args (after the program name) and returns its exit
// status. Its output goes to stdout and stderr as upstream's.
func Main(args []string) int { return run(args, os.Stdout, os.Stderr, os.Getpid()) }

func run(args []string, stdout, stderr io.Writer, pid int) int {
	if len(args) > 0 && args[0] == "-v" {
		fmt.Fprintf(stdout, "pause.c v%s\n", Version)
		return 0
	}
	if pid != 1 {
		fmt.Fprintln(stderr, "Warning: pause should be the first process")
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	defer signal.Stop(sigs)
	for sig := range sigs {
		if sig == syscall.SIGCHLD {
			reap()
			continue
		}
		fmt.Fprintf(stderr, "Shutting down, got signal: %s\n", signalName(sig))
		return 0
	}
	fmt.Fprintln(stderr, "Error: infinite loop terminated")
	return 42
}

// reap collects every child that has exited (orphans a Pod's first
// process inherits).
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// signalName is strsignal's name for sig, as pause.c prints it.
func signalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGINT:
		return "Interrupt"
	case syscall.SIGTERM:
		return "Terminated"
	}
	return sig.String()
}

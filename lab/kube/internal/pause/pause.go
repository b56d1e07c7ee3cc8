// Package pause is a pod sandbox's program, as upstream's pause.c: it does
// nothing until SIGINT or SIGTERM, then exits 0, reaping the children it
// inherits meanwhile. The kind backend's node image runs it as
// registry.k8s.io/pause (the embedded backend has its own in the svclab
// binary, lab/images/pause; this module cannot import it).
package pause

import (
	"os"
	"os/signal"
	"syscall"
)

// Main runs pause and returns its exit status.
func Main(args []string) int {
	if len(args) > 0 && args[0] == "-v" {
		os.Stdout.WriteString("pause (svclab-kube)\n")
		return 0
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			return 0
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
	return 0
}

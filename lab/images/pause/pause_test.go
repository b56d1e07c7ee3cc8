package pause

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary runs as pause when asked to, so that signals reach a
// process of its own.
func TestMain(m *testing.M) {
	if os.Getenv("PAUSE_TEST_MAIN") == "1" {
		os.Exit(Main(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func TestVersion(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-v"}, &out, &errb, 7); code != 0 || out.String() != "pause.c v"+Version+"\n" || errb.Len() != 0 {
		t.Errorf("-v: %d %q %q", code, out.String(), errb.String())
	}
}

// SIGTERM and SIGINT end pause with status 0, saying so on stderr; until
// then it runs.
func TestSignals(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		name string
	}{{syscall.SIGTERM, "Terminated"}, {syscall.SIGINT, "Interrupt"}} {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "PAUSE_TEST_MAIN=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			t.Fatalf("pause ended by itself: %v (%s)", err, stderr.String())
		case <-time.After(300 * time.Millisecond):
		}
		cmd.Process.Signal(tc.sig)
		select {
		case err := <-done:
			if err != nil || !strings.Contains(stderr.String(), "Shutting down, got signal: "+tc.name) || !strings.Contains(stderr.String(), "Warning: pause should be the first process") {
				t.Errorf("%s: %v, stderr %q", tc.name, err, stderr.String())
			}
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("%s did not end pause", tc.name)
		}
	}
}

package server

import (
	"os"
	"testing"

	"github.com/svclab/svclab/lab/embedded"
)

// TestMain lets the test binary serve as the embedded backend's
// supervisor and node agents.
func TestMain(m *testing.M) {
	embedded.Init()
	os.Exit(m.Run())
}

package server

import (
	"os"
	"testing"

	"github.com/svclab/svclab/lab/roles"
)

// TestMain lets the test binary serve as the embedded backend's
// supervisor and node agents.
func TestMain(m *testing.M) {
	roles.Dispatch()
	os.Exit(m.Run())
}

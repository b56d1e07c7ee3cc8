package embedded_test

import (
	"os"
	"testing"

	"github.com/svclab/svclab/lab/roles"
)

// The test binary is re-executed as the clusters' processes (supervisor,
// node agents, kube-proxy, the pods' programs): lab/roles runs them.
func TestMain(m *testing.M) {
	roles.Dispatch()
	os.Exit(m.Run())
}

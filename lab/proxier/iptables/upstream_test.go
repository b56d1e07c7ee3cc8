package iptables

import "testing"

// TestOverallIPTablesRules transcribes upstream's test of the same name.
func TestOverallIPTablesRules(t *testing.T) {
	snap := decodeSnapshot(t, "overall.yaml", readFile(t, "../testdata/upstream/overall.yaml"))
	res := render(t, upstreamConfig(), snap, Options{})
	assertRestoreEqual(t, readFile(t, "testdata/upstream/overall.iptables"), res.Restore)
}

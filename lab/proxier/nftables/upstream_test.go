//go:build linux

package nftables

import (
	"context"
	"testing"
)

// TestOverallNFTablesRules transcribes upstream's test of the same name.
func TestOverallNFTablesRules(t *testing.T) {
	nft, s := newFakeSyncer(t, upstreamConfig(t))
	snap := loadSnapshot(t, "../testdata/upstream/overall.yaml")
	if _, err := s.Sync(context.Background(), snap); err != nil {
		t.Fatal(err)
	}
	assertDumpEqual(t, readFile(t, "testdata/upstream/overall.nft"), nft.Dump())
}

// Package nftables programs a model.Snapshot into the "kube-proxy" nftables
// table exactly as kube-proxy v1.37's nftables proxier does: the same base
// chains, sets, maps, chain-name hashes, rule texts and comments.
//
// A Syncer writes knftables transactions against a knftables.Interface
// (knftables.New for a real node, knftables.NewFake for tests). The first
// sync is full (static objects, every chain, sets and maps re-read from
// the kernel); later ones are partial: only the chains of changed Services
// are rewritten, map and set elements are diffed, and chains that are no
// longer used are flushed and deleted at least a second later. Render
// produces the output of a first sync without a kernel.
//
// Its files build on Linux only: knftables lists over netlink with
// google/nftables, which builds nowhere else. On other systems (macOS,
// where svclab runs the kind backend, whose nodes are Linux) the package
// is empty, and its importers leave the nftables mode out there.
package nftables

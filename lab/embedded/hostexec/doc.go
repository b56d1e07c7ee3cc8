// Package hostexec runs the host's programs for the embedded backend — ip,
// nft, iptables, runc — behind one small interface, Runner: the seam
// through which the backend's network code (the fabric, the load
// balancer's routes, the node agent's pod network) is tested without a
// host. Exec is the real Runner.
package hostexec

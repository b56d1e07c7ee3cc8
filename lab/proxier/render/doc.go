// Package render implements "svclab proxier render": it reads Services,
// EndpointSlices and Nodes from a file and prints what kube-proxy v1.37
// would program on a node, as "nft -f" input (nftables mode) or
// "iptables-restore" input (iptables mode). Render renders what it reads;
// RenderFile reads a file (or stdin) first; Options.AddFlags gives the
// command (cmd/svclab/internal/cli) its flags.
package render

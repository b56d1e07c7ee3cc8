// Package render implements "svclab proxier render": it reads Services,
// EndpointSlices and Nodes from a file and prints what kube-proxy v1.37
// would program on a node, as "nft -f" input (nftables mode) or
// "iptables-restore" input (iptables mode). NewRenderCommand returns the
// cobra command; Render is the same without the command line.
package render

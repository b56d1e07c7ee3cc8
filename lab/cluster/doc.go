// Package cluster defines the seam every part of svclab talks to a lab
// cluster through: the Cluster interface (a client, the nodes, commands run on
// a node), the Provider interface that backends (embedded, kind) implement to
// create, list and delete clusters, and the progress reporting that long
// operations use in the CLI and the web UI.
//
// It is also the one place that knows how a node's dataplane is reached:
// DataplaneOutput runs a command against it and NodeHTTP sends HTTP from
// its network, with svclab's own code in the node's network namespace on
// clusters that have them (NetnsCluster: embedded) and through the node's
// tools elsewhere (kind).
package cluster

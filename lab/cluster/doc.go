// Package cluster defines the seam every part of svclab talks to a lab
// cluster through: the Cluster interface (a client, the nodes, commands run on
// a node), the Provider interface that backends (embedded, kind) implement to
// create, list and delete clusters, and the progress reporting that long
// operations use in the CLI and the web UI.
package cluster

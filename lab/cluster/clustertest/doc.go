// Package clustertest is the fake lab cluster that unit tests share.
//
// Cluster is a cluster.Cluster over client-go's fake clientset: by default
// three nodes (a control plane and two workers, as a lab cluster is made),
// its node commands recorded and answered from a script (by node and
// command, or by a function; terminals, NodeTerminal, run their commands
// the same way, over pipes), and a client configuration that reaches no
// server but names one life of the cluster (cluster.Generation).
//
// Provider is a cluster.Provider whose clusters are Clusters: names in a
// map, creation can be held (SetGate) or made to fail (FailWith), and a
// cancelled creation rolls back as the real backends do.
package clustertest

// Package proxierctl is svclab's client of the bundled proxier's own
// endpoints on a lab's nodes (the metrics port, 127.0.0.1:10249): its
// mode (/proxyMode), its fault switches (/faults, a faults.Patch) and its
// syncs (/sync), the teaching hooks signed with the lab's control key
// (package control). The fault library, the grader, the live views and
// sessions reach the proxiers through it.
//
// Requests go through cluster.NodeHTTP: from svclab's own HTTP client in
// the node's network namespace where the cluster has one
// (cluster.NetnsCluster), so a learner's tools on the node cannot answer
// for the proxier; elsewhere (kind) with curl on the node. The teaching
// hooks are signed on both (kind clusters keep their key too).
package proxierctl

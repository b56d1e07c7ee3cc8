// Package roles is the one table of the svclab binary's other programs:
// called under another name (argv[0]), the binary is that program — the
// runc wrapper of svclab's Docker engine, an embedded cluster's
// supervisor, node agents and load balancer, and the programs of the lab's
// pod images (kube-proxy, agnhost, pause, nginx, httpd).
//
// cmd/svclab's main calls Dispatch first thing, before it installs signal
// handlers, so that these programs get signals exactly as their upstream
// counterparts do; so does TestMain of every test that creates clusters,
// whose test binary is re-executed in these roles.
package roles

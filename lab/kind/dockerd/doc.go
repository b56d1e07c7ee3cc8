// Package dockerd gives the kind backend a Docker engine: the user's when
// one answers, otherwise svclab's own dockerd, started on demand.
//
// svclab's own engine is Debian's docker.io (installed as root by
// hostsetup, the one installer of system packages) running with everything
// under one directory of svclab's cache (DefaultDir):
//
//	daemon.json   the configuration below
//	docker.sock   the API socket (DOCKER_HOST=unix://…/docker.sock)
//	data/         data-root: images (the kind node image stays cached here)
//	exec/         exec-root: the running state
//	dockerd.pid   the daemon's process; dockerd.log its output
//	bin/          svclab-runc, the capability wrapper runtime, when needed
//	users.lock    held shared by every svclab process using the engine
//
// The daemon changes nothing of the host's network: no iptables rules (so
// no FORWARD policy change and no masquerade toward the outside), no
// default bridge; kind's network is a plain bridge between the nodes, and
// the API servers are published on 127.0.0.1 by docker-proxy.
//
// Where the machine's capability bounding set lacks capabilities a
// privileged container asks for (CapBnd in /proc/self/status, compared with
// /proc/sys/kernel/cap_last_cap), runc refuses to start kind's nodes. The
// daemon then runs its containers with svclab-runc, which drops the missing
// capabilities from the container's config.json (and an exec's
// process.json) before it execs runc; elsewhere plain runc is used.
//
// The daemon runs detached, so that clusters outlive the command that made
// them. Release stops it when no svclab process uses it and no container
// is left; a later Ensure starts it again. After a crash, the next Ensure
// finds a dead pid file and unmounts and removes what the old daemon left
// in exec/.
package dockerd

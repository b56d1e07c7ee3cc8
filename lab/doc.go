// Package lab is the root of svclab's domain code; it holds nothing but
// this map.
//
// # What lives where
//
// The command line and the server sit on top; the domain in the middle;
// the cluster seam and the backends below it; the proxier beside them.
//
//	cmd/svclab            main: the binary's roles by argv[0] (the table: lab/roles),
//	                      then the command line
//	cmd/svclab/internal/cli
//	                      every command of svclab, one file per command tree
//	                      (thin: flags → a domain call); env.go: the shared
//	                      flags, read once: state dir, database, log level,
//	                      limits, the backend (--backend)
//	lab/roles             what the binary runs when called by another name
//	                      (svclab-runc, the embedded cluster's processes, pods' programs)
//	server/, web/         the HTTP server and its templ pages and assets (server/terminal:
//	                      a shell on a node for the browser terminal; server/ratelimit)
//
//	lab/scenario          the data: scenario.yaml, checks, the catalog (scenarios/ holds the files)
//	lab/faults            how lessons break a cluster (a registry checked against declarations)
//	lab/grade             how checks are judged on a live cluster
//	lab/session           one scenario on one cluster: set up, break, solve, tear down;
//	                      exercise runs (Run, Exercise)
//	lab/attempt           a learner's attempts: start, check, hints, history (on lab/store)
//	lab/class             classrooms and exams: joins, labs (class/labs), the board (class/stream)
//	lab/views             what the live panels show (EndpointSlices, rules, conntrack, probes, path;
//	                      views/viewstest: the fake lab of its and the server's tests)
//	lab/store             persistence (SQLite or PostgreSQL; store/sqldb: migrations, retries)
//	lab/netcheck          svclab's own traffic (probes of the grader and the views)
//	lab/proxierctl        the client of the bundled proxier's status and fault endpoints
//	lab/conformance       upstream's [sig-network] conformance specs on a lab cluster
//
//	lab/cluster           the seam: Provider, Cluster, progress, names; cluster/owner: who holds a cluster;
//	                      cluster/nodetty: node commands behind svclab's pseudo-terminals
//	lab/embedded          the embedded backend: control plane, nodes as network namespaces,
//	                      runc pods (embedded/nodeagent: its kubelet; embedded/netpol: its
//	                      NetworkPolicy; embedded/loadbalancer: its cloud load balancer;
//	                      embedded/hostexec: the host's programs it runs, ip, nft, runc;
//	                      embedded/cgroups: a lab's limits; embedded/userns: its user
//	                      namespace; embedded/nsenter: entering its namespaces from the host)
//	lab/kind              the kind backend: kind clusters on Docker (kind/dockerd: svclab's own
//	                      engine; kind/nodeimage: the offline node image; kind/ociimage: its images)
//	lab/images            the images pods run from, built here (no registry; images/agnhost,
//	                      images/pause, images/webserver: the programs in them)
//	lab/kubebin           builds and finds svclab-kube: kubectl and the control plane built from
//	                      the Kubernetes modules, whose source is lab/kube (a Go module of its own)
//	lab/hostsetup         the host's packages: checks them, installs what is missing on Debian
//	lab/flock             file locks between processes, dropped by the kernel with their holder
//	lab/mounts            the host's mounts of a lab: listed from mountinfo, detached
//	                      through descriptors that follow no symlink a lab planted
//	lab/proxier           the bundled kube-proxy (its own README; imports nothing else of svclab)
//
// # Which may import which
//
// Downward only. cmd/svclab/internal/cli, lab/roles and server may import
// anything. The domain
// packages (scenario, faults, grade, session, attempt, class, views,
// store) reach clusters only through lab/cluster and import no
// backend: `go list -deps ./lab/session` shows neither lab/embedded nor
// lab/kind. The command line's env.go is the one place that knows both
// backends by name. lab/proxier imports nothing of svclab outside itself;
// svclab talks to a running proxier through lab/proxierctl.
//
// # Where a change goes
//
//   - a new lesson: a directory under scenarios/ (svclab scenario lint);
//     a new way to break a cluster: a fault in lab/faults, declared and
//     registered; a new kind of check: lab/scenario (the format) and
//     lab/grade (the judging).
//   - a new command or flag: cmd/svclab/internal/cli (shared flags: its
//     env.go); the work it does goes in the domain package it calls.
//   - a new program the binary stands in for (argv[0]): lab/roles.
//   - what a panel shows: lab/views (the model) and web/ (the page).
//   - a rule the proxier writes: lab/proxier, with its golden files.
//   - what a node runs or how: lab/embedded and embedded/nodeagent (embedded),
//     lab/kind (kind); both behind lab/cluster.
//   - what is kept: lab/store (a numbered migration in store/sqldb).
//   - a test that needs a cluster without one: lab/cluster/clustertest (the
//     one fake cluster and provider); the built-in catalog: scenarios.Load.
//
// # Names
//
// A lab is a learner's: a scenario on a cluster (class/labs.Lab in a class).
// What lab/session makes of a scenario on a cluster is a Session (attempt
// starts them through a Starter); views.Feed feeds a lab's live panels; a
// Runner runs the host's programs (embedded/hostexec), except the proxier's
// BoundedFrequencyRunner, which keeps upstream's name.
package lab

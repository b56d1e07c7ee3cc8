// Package cli is svclab's command line: every cobra command of the svclab
// binary, the tree that cmd/svclab runs. Each command is thin: it parses
// flags and calls the domain package that does the work (package attempt
// for the learner's scenario commands, session for exercise runs, class,
// conformance, the cluster backends, server).
//
// Files follow the command tree: cluster.go is "svclab cluster" (create,
// delete, list, kubeconfig), scenario.go "svclab scenario" (lint, list and
// the attempt commands start, check, hint, ...), and so on; root.go is the
// root command and version.
//
// env.go is what every command shares, read once by the root command
// before any command runs: the state directory, the database, the log
// level, the labs' limits and the cluster backend. The backend is
// --backend (or SVCLAB_BACKEND) when given, else the one that fits the
// machine: embedded where it can run (Linux, as root, with the system
// commands it needs), kind everywhere else (macOS, a Linux user without
// root). Commands that find a cluster by name (kubectl, node, cluster
// kubeconfig and delete) look on every backend unless --backend names one.
//
// A command that fails after it printed why (a grade, a lint report)
// returns an ExitError, which main turns into the exit code alone.
package cli

// Package cmdenv is what every svclab command takes from the root
// command's flags, read in one place: the state directory, the database,
// the log level, the labs' limits and the cluster backend.
//
// The backend is --backend (or SVCLAB_BACKEND) when given, else the one
// that fits the machine: embedded where it can run (Linux, as root, with
// the system commands it needs), kind everywhere else (macOS, a Linux
// user without root). Every command that creates or finds clusters (serve,
// scenario, exercise, class, cluster, conformance) gets its provider from
// Env.Provider.
package cmdenv

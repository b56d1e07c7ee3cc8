// Package agnhost is svclab's implementation of the Kubernetes e2e test
// image's agnhost program (registry.k8s.io/e2e-test-images/agnhost), with
// the subcommands Service scenarios use: netexec, serve-hostname, pause,
// porter, liveness, test-webserver, dns-suffix, dns-server-list, etc-hosts
// and connect. Flags, endpoints, responses, log lines and exit codes follow
// upstream, so pod specs and commands written for the real image work
// unchanged; SCTP is not supported.
//
// The svclab binary runs Main when it is invoked as /agnhost in the lab's
// agnhost image. Log lines use the standard log package's format because
// that is what upstream prints and what learners see in kubectl logs.
package agnhost

// Package netcheck is svclab's own traffic: the probes of the grader, the
// live views and the faults, made by svclab's code from inside a node's or
// a Pod's network namespace (cluster.Netns). Nothing a learner left in
// the lab — a curl that always prints "ok", an nc that never waits, a dig
// that answers from a file — takes part, so none of it can make a failing
// check pass or a passing one fail.
//
// An attempt is classified as curl, nc and dig would be read: an answer
// (any HTTP status) is a success; a refusal (an RST, an ICMP port or host
// unreachable) is refused; nothing within the timeout is a timeout; an
// NXDOMAIN or an empty answer is a DNS failure; anything else is an error,
// reported as such and never counted as an expected outcome.
package netcheck

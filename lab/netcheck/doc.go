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
// reported as such and never counted as an expected outcome. An http
// attempt that connects and gets no HTTP answer is such an error
// (NoHTTPAnswer): the backend that took it is not the application.
//
// Where svclab cannot dial from the lab itself (kind's nodes and Pods), a
// program there makes the attempt and FromShell classifies its exit
// status and words the same way: the grader's and the live views' one
// classifier, so the traffic panel and a check never disagree on an
// outcome.
package netcheck

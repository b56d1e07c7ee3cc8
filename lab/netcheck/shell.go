package netcheck

import "strings"

// NoHTTPAnswer is the detail of an http attempt that connected and got no
// HTTP answer: the server closed the connection without one (curl's exit
// 52, "Empty reply from server"). It is an error, never a success: the
// backend that took the connection is not the application the probe asked.
const NoHTTPAnswer = "connected, but the server closed the connection without an HTTP answer"

// FromShell classifies an attempt that a program in the lab made — curl,
// busybox wget, bash's /dev/tcp, nc, dig or busybox nslookup, where
// svclab cannot dial itself (kind nodes and Pods) — by its exit status rc
// and its output (stdout and stderr, newlines made spaces), exactly as Run
// classifies the attempts it makes itself. The Body of a success is the
// output; the Detail of anything else is the program's own words.
func FromShell(protocol string, rc int, output string) Result {
	text := strings.TrimSpace(output)
	lower := strings.ToLower(text)
	has := func(words ...string) bool {
		for _, w := range words {
			if strings.Contains(lower, w) {
				return true
			}
		}
		return false
	}
	if rc == 0 {
		switch protocol {
		case "udp":
			if text == "" {
				return Result{Outcome: Timeout, Detail: "no answer in time"}
			}
		case "dns":
			answered := false
			for _, l := range strings.Split(text, " ") {
				if l != "" && !strings.HasPrefix(l, ";") {
					answered = true
				}
			}
			if strings.Contains(text, "Server:") { // busybox nslookup
				answered = strings.Contains(text, "Name:")
			}
			if !answered || has("nxdomain", "can't find") {
				if text == "" {
					text = "no address in the answer"
				}
				return Result{Outcome: DNSFailure, Detail: text}
			}
		}
		return Result{Outcome: Success, Body: text}
	}
	switch {
	case strings.HasPrefix(text, "curl: (7)"): // curl could not connect: refused or unreachable
		return Result{Outcome: Refused, Detail: text}
	case strings.HasPrefix(text, "curl: (28)"):
		return Result{Outcome: Timeout, Detail: text}
	case strings.HasPrefix(text, "curl: (52)"):
		return Result{Outcome: Error, Detail: NoHTTPAnswer}
	case has("refused", "reset by peer", "unreachable", "no route to host"):
		return Result{Outcome: Refused, Detail: text}
	case has("server returned error"): // wget: an HTTP error status is an answer
		return Result{Outcome: Success, Body: text}
	case has("could not resolve", "could-not-resolve", "bad address", "nxdomain", "can't find", "name or service not known"):
		return Result{Outcome: DNSFailure, Detail: text}
	case has("timed out", "timeout", "connection timed out") || rc == 28 || rc == 124 || rc == 143:
		// curl says 28; timeout(1) ends an attempt that hung with 124 (or
		// a TERM).
		if text == "" {
			text = "no answer in time"
		}
		return Result{Outcome: Timeout, Detail: text}
	}
	// Not an outcome svclab can read: it says so, and it never counts as
	// the outcome a check expects.
	if text == "" {
		text = "no output"
	}
	return Result{Outcome: Error, Detail: text}
}

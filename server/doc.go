// Package server is svclab's HTTP server: chi routes, request logs through
// slog, a health endpoint and graceful shutdown. It renders the components
// in web/ from the state of the lab's clusters.
//
// A scenario's page is a workspace fed by two websockets: the terminal
// (live.go) and the live views. The views run one views.Feed per attempt and
// cluster generation (labs.go: cluster.Generation, the CA's hash); a socket
// ends with close code 4001 when its attempt or generation stops being the
// learner's current one (the page loads again) and 4002, after a "down"
// health frame, when the cluster is gone. The lab's life in the learner's
// hands — Start over, End scenario, Delete lab, the Clusters page — is in
// lifecycle.go; each asks first (confirmed=yes, or a page that asks).
// Long operations run in operations.go and say what failed in a learner's
// words, the raw error behind "details". Failed class joins, check runs and
// starts and resets of labs are rate-limited (package ratelimit).
package server

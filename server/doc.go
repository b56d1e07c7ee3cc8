// Package server is svclab's HTTP server: chi routes, request logs through
// slog, a health endpoint and graceful shutdown. It renders the components
// in web/ from the state of the lab's clusters.
package server

// Package cli is svclab's command line: the cobra command tree that
// cmd/svclab runs. Each command is thin: it parses flags and calls the
// domain package that does the work.
package cli

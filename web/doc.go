// Package web holds svclab's user interface: templ components (the
// generated *_templ.go files are committed; 'go tool task generate'
// regenerates them and the tests fail when they are stale) and the static
// assets they use.
package web

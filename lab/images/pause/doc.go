// Package pause is the program of the registry.k8s.io/pause image, as the
// lab's images serve it (the svclab binary run as /pause): it does nothing
// until SIGINT or SIGTERM, which end it with status 0, and reaps the
// children it inherits as a Pod's first process, like upstream's pause.c.
package pause

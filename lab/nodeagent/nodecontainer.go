package nodeagent

// nodeInit is the node container's init: it waits, and exits on SIGTERM
// (a plain sleep as PID 1 would ignore it).
var nodeInit = []string{"/bin/sh", "-c", `trap "exit 0" TERM INT; while :; do sleep 3600 & wait $!; done`}

// PrepareNodeContainer writes the bundle of a node's own container: the
// node's filesystem (the tools image under a writable layer that lasts as
// long as the cluster), privileged, in the node's network namespace, with
// the node's hostname. Node shells and node-level commands run in it, so
// they see the node's network and rules but never the host's filesystem or
// processes. Run it with `runc run --bundle BUNDLE ID`.
func PrepareNodeContainer(bundle string, img Image, netnsPath, hostname string) error {
	r := &runc{}
	return r.prepare(containerSpec{
		Bundle:     bundle,
		Image:      img,
		Args:       nodeInit,
		Env:        append(append([]string(nil), img.Env...), "TERM=xterm-256color", "HOME=/root"),
		Cwd:        "/root",
		Hostname:   hostname,
		Netns:      netnsPath,
		Privileged: true,
	})
}

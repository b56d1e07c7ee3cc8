// Package userns gives an embedded lab its own user namespace, so that root
// in the lab — in a node shell, in any Pod, privileged or not — is an
// unprivileged id on the host.
//
// A lab owns a Range of host ids, claimed machine-wide (Allocator: one
// claim file per range, so two labs of any state directory never share
// one, and a crash does not free a range whose lab may still run). Create
// makes the lab's user namespace, mapping the range from id 0, and pins
// it on a file (a bind mount of its nsfs file, as "ip netns add" pins a
// network namespace), so it outlives every process in it.
//
// Everything of the lab that the learner reaches is in that namespace or
// owned by it: NewNetns creates network namespaces owned by it (root in the
// lab has full power over its nodes' and Pods' dataplanes, none over the
// host's), the container runtime joins it, and IDMapMount makes the shared
// image layers appear owned by the lab's ids without copying them
// (idmapped mounts, which overlayfs accepts as lower layers).
//
// NewChild makes a user namespace nested in a lab's, for Pods that ask for
// one of their own (hostUsers: false), mapping a sub-range of the lab's ids.
package userns

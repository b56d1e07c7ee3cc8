// Package images builds the container images embedded clusters run, on
// this machine and without a registry, and maps the image references in
// pod specs to them.
//
// There are five images, each a stack of read-only layer directories for
// overlayfs:
//
//   - svclab/tools: Debian bookworm (debootstrap's minbase variant) with
//     bash, busybox, curl, wget, dig/nslookup, nc, socat, ip, nft, iptables,
//     conntrack, tcpdump, ping and ps. It serves busybox, ubuntu, debian,
//     alpine, curlimages/curl and nicolaka/netshoot, with each upstream
//     image's default command, and every busybox applet is on PATH after
//     Debian's own commands.
//   - svclab/agnhost: tools plus /agnhost, our implementation of the
//     upstream test image's subcommands (package agnhost), for
//     registry.k8s.io/e2e-test-images/agnhost:* (and, as its boom-server,
//     registry.k8s.io/e2e-test-images/regression-issue-74839:*).
//   - svclab/web: tools plus an nginx- and httpd-compatible server
//     (package webserver), for nginx:* and httpd:*.
//   - svclab/coredns: tools plus /coredns, which is svclab-kube's CoreDNS,
//     for registry.k8s.io/coredns/coredns:*.
//   - svclab/proxier: tools plus /usr/local/bin/kube-proxy, the bundled
//     proxier, for registry.k8s.io/kube-proxy:* and svclab/proxier.
//
// The agnhost, web and proxier programs are the svclab binary itself under
// other names (it dispatches on the name it is called by: lab/roles); the
// binary sits in a layer of its own so the three share one copy.
//
// Layers live in Store.Dir()/layers/NAME-KEY/rootfs, where KEY hashes what
// went in (the package list and recipe, the binary, the files), so a
// change rebuilds only what changed. Each layer is built in a temporary
// directory and renamed into place when complete. Building the tools layer
// needs root and the Debian mirror apt uses; the packages it downloaded are
// kept until it completes, so an interrupted build resumes.
package images

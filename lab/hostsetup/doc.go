// Package hostsetup checks that the host has the system packages svclab
// needs (iproute2, nftables, iptables, conntrack, runc, chromium for the
// UI tests, ...) and, as root on Debian, installs the missing ones with
// apt-get; elsewhere it says exactly what to install.
package hostsetup

// Package hostsetup checks that the host has the system packages svclab
// needs (iproute2, nftables, iptables, conntrack, runc, chromium for the
// UI tests, postgresql for the PostgreSQL tests and --database-url, ...) and, as root on Debian, installs the missing ones with
// apt-get; elsewhere it says exactly what to install.
package hostsetup

// Package nfacct creates and reads nfacct counters over netlink (the
// kernel's NFNL_SUBSYS_ACCT), as kube-proxy's pkg/proxy/util/nfacct does.
// kube-proxy's iptables proxier creates two counters at every full sync and,
// when it could, refers to them from its rules with "-m nfacct
// --nfacct-name"; its metrics server reports their packet counts.
package nfacct

//go:build linux

package nodeagent

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// maxDNSSearchPathChars: the kubelet leaves out a search path longer than a
// DNS subdomain, as some resolvers abort on one. The other limits are the
// API server's (validate.go), which the kubelet applies to the composed
// configuration too.
const maxDNSSearchPathChars = 253

// podDNS is what a Pod's resolv.conf holds.
type podDNS struct {
	servers, searches, options []string
	// warnings are what the kubelet reports as DNSConfigForming events:
	// limits that cut the configuration.
	warnings []string
}

// dnsFor composes pod's DNS configuration as the kubelet's GetPodDNS does
// (pkg/kubelet/network/dns): the policy gives the base — the cluster's
// resolver and search paths with ndots:5 (ClusterFirst, or
// ClusterFirstWithHostNet), the node's own (Default, and ClusterFirst on
// the host's network), nothing (None) — dnsConfig is merged into it
// (nameservers and search paths appended without duplicates, options
// overriding those of the same name), and the kubelet's limits cut what is
// too much. A lab node has no resolver of its own: like a kubelet whose
// --resolv-conf is empty, its base is nameserver 127.0.0.1 and search ".".
func dnsFor(pod *corev1.Pod, clusterDNS, domain string) podDNS {
	var d podDNS
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = corev1.DNSClusterFirst
	}
	if policy == corev1.DNSClusterFirst && pod.Spec.HostNetwork {
		policy = corev1.DNSDefault
	}
	switch policy {
	case corev1.DNSNone:
	case corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet:
		d.servers = []string{clusterDNS}
		d.searches = []string{pod.Namespace + ".svc." + domain, "svc." + domain, domain}
		d.options = []string{"ndots:5"}
	default:
		d.servers, d.searches = []string{"127.0.0.1"}, []string{"."}
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		d.servers = omitDuplicates(append(d.servers, dc.Nameservers...))
		d.searches = omitDuplicates(append(d.searches, dc.Searches...))
		d.options = mergeDNSOptions(d.options, dc.Options)
	}
	if len(d.servers) > maxDNSNameservers {
		d.servers = d.servers[:maxDNSNameservers]
		d.warnings = append(d.warnings, "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: "+strings.Join(d.servers, " "))
	}
	cut := false
	if len(d.searches) > maxDNSSearchPaths {
		d.searches, cut = d.searches[:maxDNSSearchPaths], true
	}
	if n := len(d.searches); n > 0 {
		d.searches = slices.DeleteFunc(d.searches, func(s string) bool { return len(s) > maxDNSSearchPathChars })
		cut = cut || len(d.searches) != n
	}
	for len(d.searches) > 0 && len(strings.Join(d.searches, " ")) > maxDNSSearchListLen {
		d.searches, cut = d.searches[:len(d.searches)-1], true
	}
	if cut {
		d.warnings = append(d.warnings, "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: "+strings.Join(d.searches, " "))
	}
	return d
}

// resolvConf renders d as the container runtime writes it: one search
// line, the nameservers, one options line.
func (d podDNS) resolvConf() string {
	var b strings.Builder
	if len(d.searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(d.searches, " "))
	}
	for _, s := range d.servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	if len(d.options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(d.options, " "))
	}
	return b.String()
}

func omitDuplicates(ss []string) []string {
	var out []string
	for _, s := range ss {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// mergeDNSOptions merges dnsConfig's options into the base's: one of the
// same name replaces it (the kubelet's mergeDNSOptions; its order is a
// map's, here the base's order, then the new ones').
func mergeDNSOptions(base []string, extra []corev1.PodDNSConfigOption) []string {
	out := append([]string(nil), base...)
	name := func(o string) string { n, _, _ := strings.Cut(o, ":"); return n }
	for _, o := range extra {
		s := o.Name
		if o.Value != nil && *o.Value != "" {
			s += ":" + *o.Value
		}
		if i := slices.IndexFunc(out, func(x string) bool { return name(x) == o.Name }); i >= 0 {
			out[i] = s
		} else {
			out = append(out, s)
		}
	}
	return out
}

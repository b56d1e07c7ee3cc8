package iptables

import (
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/svclab/svclab/lab/proxier/model"
)

// Cases from upstream TestComputeProbability.
func TestProbability(t *testing.T) {
	for n, want := range map[int]string{
		1: "1.0000000000", 2: "0.5000000000", 10: "0.1000000000", 100: "0.0100000000",
		1000: "0.0010000000", 10000: "0.0001000000", 100000: "0.0000100000", 100001: "0.0000099999",
	} {
		if got := probability(n); got != want {
			t.Errorf("probability(%d) = %s, want %s", n, got, want)
		}
	}
	prev := 0.0
	for i := 100000; i > 1; i-- {
		p, err := strconv.ParseFloat(probability(i), 64)
		if err != nil {
			t.Fatal(err)
		}
		if p <= prev {
			t.Fatalf("probability(%d) = %v not above probability(%d) = %v", i, p, i+1, prev)
		}
		prev = p
	}
}

func TestChainNames(t *testing.T) {
	spn := func(ns, name, port string) model.ServicePortName {
		return model.ServicePortName{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}, Port: port, Protocol: v1.ProtocolTCP}
	}
	tests := []struct{ got, want string }{
		// From the fact sheet and upstream's expected rules.
		{svcChainPrefix + ServiceChainSuffix(spn("demo", "web", "http")), "KUBE-SVC-XRY76EGRC3BSCIIJ"},
		{svcChainPrefix + ServiceChainSuffix(spn("ns1", "svc1", "p80")), "KUBE-SVC-XPGD46QRK7WJZT7O"},
		{EndpointChain(spn("ns1", "svc1", "p80"), model.Endpoint{IP: "10.180.0.1", Port: 80}), "KUBE-SEP-SXIVWICOYRO3J4NJ"},
		{EndpointChain(spn("demo", "web", "http"), model.Endpoint{IP: "10.180.0.1", Port: 8080}), "KUBE-SEP-2VBILYRCJMUY2CVJ"},
		{EndpointChain(spn("demo", "web", "http"), model.Endpoint{IP: "10.180.2.1", Port: 8080}), "KUBE-SEP-O6TLQBNTV5TAWV3U"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got %s, want %s", tc.got, tc.want)
		}
	}
	if !isServiceChainName("KUBE-SEP-X") || isServiceChainName("KUBE-SERVICES") || isServiceChainName("KUBE-MARK-MASQ") {
		t.Error("isServiceChainName misclassifies")
	}
}

func TestJumpRules(t *testing.T) {
	rules := JumpRules()
	var lines []string
	for _, r := range rules {
		lines = append(lines, r.String())
	}
	got := strings.Join(lines, "\n")
	for _, want := range []string{
		`-t filter -I INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES`,
		`-t nat -I PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
		`-t nat -I POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING`,
		`-t filter -I OUTPUT -j KUBE-FIREWALL`,
	} {
		if !strings.Contains(got, want+"\n") && !strings.HasSuffix(got, want) {
			t.Errorf("missing jump rule %q in:\n%s", want, got)
		}
	}
	if len(rules) != 14 {
		t.Errorf("got %d jump rules, want 14", len(rules))
	}
}

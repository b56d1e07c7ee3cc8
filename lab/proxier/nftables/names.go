//go:build linux

package nftables

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/svclab/svclab/lab/proxier/model"
	"sigs.k8s.io/knftables"
)

// Table is the nftables table kube-proxy owns (in family ip or ip6).
const Table = "kube-proxy"

// Base chains (one per hook/priority) and static regular chains.
const (
	filterPreroutingPreDNATChain = "filter-prerouting-pre-dnat"
	filterOutputPreDNATChain     = "filter-output-pre-dnat"
	filterInputChain             = "filter-input"
	filterForwardChain           = "filter-forward"
	filterOutputChain            = "filter-output"
	natPreroutingChain           = "nat-prerouting"
	natOutputChain               = "nat-output"
	natPostroutingChain          = "nat-postrouting"

	servicesChain               = "services"
	serviceEndpointsCheckChain  = "service-endpoints-check"
	nodePortEndpointsCheckChain = "nodeport-endpoints-check"
	rejectChain                 = "reject-chain"
	clusterIPsCheckChain        = "cluster-ips-check"
	firewallCheckChain          = "firewall-check"
	masqueradingChain           = "masquerading"
)

// Sets and maps.
const (
	clusterIPsSet          = "cluster-ips"
	nodePortIPsSet         = "nodeport-ips"
	hairpinConnectionsSet  = "hairpin-connections"
	serviceIPsMap          = "service-ips"
	serviceNodePortsMap    = "service-nodeports"
	noEndpointServicesMap  = "no-endpoint-services"
	noEndpointNodePortsMap = "no-endpoint-nodeports"
	firewallIPsMap         = "firewall-ips"

	// The localhost NodePort objects belong to the alpha gate
	// KubeProxyNFTablesLocalhostNodePorts, which svclab does not implement;
	// like upstream with the gate off, a full sync makes sure they are gone.
	localhostNodePortRejectMap = "localhost-nodeport-reject-ports"
)

// Prefixes of per-service objects. Every per-service chain name contains a
// "/", which no static chain does.
const (
	clusterChainPrefix  = "service-"
	localChainPrefix    = "local-"
	externalChainPrefix = "external-"
	endpointChainPrefix = "endpoint-"
	affinitySetPrefix   = "affinity-"
	firewallChainPrefix = "firewall-"

	// chainNameBaseLengthMax leaves room for the longest prefix.
	chainNameBaseLengthMax = knftables.NameLengthMax - 16
)

// hashAndTruncate prefixes name with the first 8 characters of the base32
// SHA-256 of name, and truncates the result to chainNameBaseLengthMax.
func hashAndTruncate(name string) string {
	hash := sha256.Sum256([]byte(name))
	encoded := base32.StdEncoding.EncodeToString(hash[:])
	name = encoded[:8] + "-" + name
	if len(name) > chainNameBaseLengthMax {
		name = name[:chainNameBaseLengthMax-3] + "..."
	}
	return name
}

// ServicePortChainBase is "HASH-namespace/name/protocol/portName".
func ServicePortChainBase(name model.ServicePortName) string {
	return hashAndTruncate(fmt.Sprintf("%s/%s/%s/%s", name.Namespace, name.Name, strings.ToLower(string(name.Protocol)), name.Port))
}

// EndpointChainBase is "HASH-namespace/name/protocol/portName__IP/port"; the
// colons of an IPv6 address become dots.
func EndpointChainBase(name model.ServicePortName, ep model.Endpoint) string {
	ip := strings.ReplaceAll(ep.IP, ":", ".")
	return hashAndTruncate(fmt.Sprintf("%s/%s/%s/%s__%s/%d", name.Namespace, name.Name, strings.ToLower(string(name.Protocol)), name.Port, ip, ep.Port))
}

// isServiceChainName reports whether chain is a per-service chain.
func isServiceChainName(chain string) bool { return strings.Contains(chain, "/") }

func isAffinitySetName(set string) bool { return strings.HasPrefix(set, affinitySetPrefix) }

// truncateComment cuts s to the longest comment nft accepts.
func truncateComment(s string) string {
	if len(s) > knftables.CommentLengthMax {
		return s[:knftables.CommentLengthMax]
	}
	return s
}

// portChains holds the per-ServicePort object names.
type portChains struct {
	cluster, local, external, firewall string
}

func chainsFor(name model.ServicePortName) portChains {
	base := ServicePortChainBase(name)
	return portChains{
		cluster:  clusterChainPrefix + base,
		local:    localChainPrefix + base,
		external: externalChainPrefix + base,
		firewall: firewallChainPrefix + base,
	}
}

func endpointNames(name model.ServicePortName, ep model.Endpoint) (chain, affinitySet string) {
	base := EndpointChainBase(name, ep)
	return endpointChainPrefix + base, affinitySetPrefix + base
}

func hostPort(ip string, port int) string { return net.JoinHostPort(ip, strconv.Itoa(port)) }

package grade

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/svclab/svclab/lab/scenario"
)

// The witness a follows check makes: a Service of the grader's own in
// kube-system, with an EndpointSlice it manages by hand.
const (
	witnessNamespace = "kube-system"
	witnessPrefix    = "svclab-witness-"
	witnessManager   = "svclab-grader"
	// witnessAddress is an address of TEST-NET-1 (RFC 5737): no packet is
	// sent to it, the rules only name it.
	witnessAddress = "192.0.2.10"
)

// follows checks that the rules of nodes follow a change the grader makes
// at check time: its own Service gets an endpoint (every node must send the
// ClusterIP to endpoints), then loses it (every node must reject it). Rules
// a learner wrote by hand, or a proxier that is stuck or gone, do not
// follow; kube-proxy programming the node does, whatever the scenario's own
// Services look like.
func (g *Grader) follows(ctx context.Context, nodes []string, a *scenario.FollowsAssertion) (string, error) {
	within := time.Duration(a.WithinSeconds) * time.Second
	if within == 0 {
		within = scenario.DefaultFollowsWithin * time.Second
	}
	cs, err := g.client()
	if err != nil {
		return "", err
	}
	name := witnessPrefix + strings.ToLower(rand.Text()[:8])
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: witnessNamespace, Name: name,
			Labels: map[string]string{"app.kubernetes.io/managed-by": witnessManager}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	svc, err = cs.CoreV1().Services(witnessNamespace).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("creating the grader's own Service %s/%s, whose rules the nodes must follow: %w", witnessNamespace, name, err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		// The EndpointSlice would go with the Service (its owner), once
		// the garbage collector gets to it.
		_ = cs.DiscoveryV1().EndpointSlices(witnessNamespace).Delete(ctx, name, metav1.DeleteOptions{})
		if err := cs.CoreV1().Services(witnessNamespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			g.log().WarnContext(ctx, "removing the grader's own Service", "service", witnessNamespace+"/"+name, "err", err)
		}
	}()
	port, proto, ready := int32(8080), corev1.ProtocolTCP, true
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: witnessNamespace, Name: name,
			Labels:          map[string]string{discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: witnessManager},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: name, UID: svc.UID}}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{witnessAddress}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &svc.Spec.Ports[0].Name, Port: &port, Protocol: &proto}},
	}
	if slice, err = cs.DiscoveryV1().EndpointSlices(witnessNamespace).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("creating the EndpointSlice of the grader's own Service %s/%s: %w", witnessNamespace, name, err)
	}
	took, err := g.allFollow(ctx, nodes, svc, scenario.RulesEndpoints, within)
	if err != nil {
		return "", err
	}
	slice.Endpoints = nil
	if _, err := cs.DiscoveryV1().EndpointSlices(witnessNamespace).Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		return "", fmt.Errorf("taking the endpoint of the grader's own Service %s/%s away: %w", witnessNamespace, name, err)
	}
	took2, err := g.allFollow(ctx, nodes, svc, scenario.RulesReject, within)
	if err != nil {
		return "", err
	}
	var parts []string
	for i, node := range nodes {
		parts = append(parts, fmt.Sprintf("%s: followed in %s and %s", node, took[i].Round(100*time.Millisecond), took2[i].Round(100*time.Millisecond)))
	}
	return "a Service svclab made got an endpoint, then lost it; " + strings.Join(parts, "; "), nil
}

// allFollow waits until the rules of every node do want (endpoints, reject)
// with svc's traffic and returns how long each took; a node whose rules do
// not within fails the check, saying what its rules do.
func (g *Grader) allFollow(ctx context.Context, nodes []string, svc *corev1.Service, want string, within time.Duration) ([]time.Duration, error) {
	start := time.Now()
	took := make([]time.Duration, len(nodes))
	lines := make([]string, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, node := range nodes {
		wg.Go(func() {
			deadline := start.Add(within)
			for {
				v, err := g.verdict(ctx, node, svc, svc.Spec.Ports[0])
				if err != nil && ctx.Err() != nil {
					errs[i] = ctx.Err()
					return
				}
				if err == nil && v.kind == want {
					took[i] = time.Since(start)
					return
				}
				if err != nil {
					lines[i] = fmt.Sprintf("cannot be read (%v)", err)
				} else {
					lines[i] = fmt.Sprintf("still %s (%s)", verdictWords[v.kind], v.why)
				}
				if time.Now().After(deadline) {
					return
				}
				select {
				case <-ctx.Done():
					errs[i] = ctx.Err()
					return
				case <-time.After(250 * time.Millisecond):
				}
			}
		})
	}
	wg.Wait()
	var behind []string
	for i, node := range nodes {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if took[i] == 0 {
			behind = append(behind, fmt.Sprintf("the rules of %s %s", node, lines[i]))
		}
	}
	if len(behind) > 0 {
		step := "got an endpoint"
		if want == scenario.RulesReject {
			step = "lost its endpoint"
		}
		return nil, failf("the rules do not follow the API: a Service svclab made %s, and %s later %s. kube-proxy is not programming the node: rules written by hand stay as they were written, and a stuck or stopped proxier writes nothing",
			step, within, strings.Join(behind, "; "))
	}
	return took, nil
}

// verdict tells what node's rules do with new connections to sp of svc.
func (g *Grader) verdict(ctx context.Context, node string, svc *corev1.Service, sp corev1.ServicePort) (verdict, error) {
	mode, dump, err := g.proxyRules(ctx, node)
	if err != nil {
		return verdict{}, err
	}
	return verdictIn(mode, dump, svc, sp, false), nil
}

// verdictIn reads what the rules dump (of mode) do with sp of svc.
func verdictIn(mode, dump string, svc *corev1.Service, sp corev1.ServicePort, external bool) verdict {
	if mode == scenario.ProxyModeNFTables {
		return nftVerdict(parseNFTMaps(dump), svc, sp, external)
	}
	return iptablesVerdict(dump, svc, sp, external)
}

// verdictWords say a verdict in a sentence ("the rules … still …").
var verdictWords = map[string]string{
	scenario.RulesEndpoints: "send its traffic to endpoints",
	scenario.RulesReject:    "reject its traffic",
	scenario.RulesDrop:      "drop its traffic",
	scenario.RulesAbsent:    "have nothing for it",
}

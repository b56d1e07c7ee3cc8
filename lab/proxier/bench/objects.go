package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// Node is a Node object of the workload; endpoints are spread over the
// nodes, and the proxiers run for the first one.
type Node struct {
	Name string
	IP   netip.Addr
}

// Workload describes the generated objects.
type Workload struct {
	// Namespace holds the Services and EndpointSlices.
	Namespace string
	// EndpointsPerService is the size of each Service's one EndpointSlice.
	EndpointsPerService int
	// NodePortServices caps how many Services are of type NodePort (the
	// others are ClusterIP): the NodePort range holds only so many.
	NodePortServices int
	// Nodes carry the endpoints, round robin; Nodes[0] is the proxiers'.
	Nodes []Node
	// EndpointBase is the first endpoint IP; Service i's endpoint j is
	// EndpointBase + i*EndpointsPerService + j. Replacement endpoints of
	// partial syncs count down from the top of ClusterCIDR.
	EndpointBase netip.Addr
	// ClusterCIDR contains every endpoint.
	ClusterCIDR netip.Prefix
}

// ServiceName is the name of Service i.
func ServiceName(i int) string { return fmt.Sprintf("svc-%05d", i) }

// serviceIndex parses a ServiceName, or returns -1.
func serviceIndex(name string) int {
	s, ok := strings.CutPrefix(name, "svc-")
	if !ok {
		return -1
	}
	i, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return i
}

func addrAdd(base netip.Addr, n uint32) netip.Addr {
	b := base.As4()
	var out [4]byte
	binary.BigEndian.PutUint32(out[:], binary.BigEndian.Uint32(b[:])+n)
	return netip.AddrFrom4(out)
}

// lastAddr is the last address of p (IPv4).
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	v := binary.BigEndian.Uint32(b[:]) | (1<<(32-p.Bits()) - 1)
	var out [4]byte
	binary.BigEndian.PutUint32(out[:], v)
	return netip.AddrFrom4(out)
}

// Validate checks that n Services' endpoints fit in ClusterCIDR, below
// the replacement endpoints.
func (w Workload) Validate(n int) error {
	if len(w.Nodes) == 0 || w.EndpointsPerService <= 0 {
		return errors.New("workload: needs nodes and endpoints")
	}
	last := addrAdd(w.EndpointBase, uint32(n*w.EndpointsPerService))
	if !w.ClusterCIDR.Contains(w.EndpointBase) || !w.ClusterCIDR.Contains(last) {
		return fmt.Errorf("workload: %d endpoints from %s do not fit in %s", n*w.EndpointsPerService, w.EndpointBase, w.ClusterCIDR)
	}
	return nil
}

// Service is Service i (before the API server allocates its IP and port).
func (w Workload) Service(i int) *v1.Service {
	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: ServiceName(i), Namespace: w.Namespace},
		Spec: v1.ServiceSpec{
			Type:  v1.ServiceTypeClusterIP,
			Ports: []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	if i < w.NodePortServices {
		svc.Spec.Type = v1.ServiceTypeNodePort
	}
	return svc
}

// EndpointSlice is Service i's EndpointSlice.
func (w Workload) EndpointSlice(i int) *discovery.EndpointSlice {
	es := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: ServiceName(i) + "-0", Namespace: w.Namespace, Labels: map[string]string{
			discovery.LabelServiceName: ServiceName(i), discovery.LabelManagedBy: "bench.svclab.dev"}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](8080)}},
	}
	for j := range w.EndpointsPerService {
		ip := addrAdd(w.EndpointBase, uint32(i*w.EndpointsPerService+j))
		es.Endpoints = append(es.Endpoints, discovery.Endpoint{
			Addresses: []string{ip.String()},
			NodeName:  ptr.To(w.Nodes[j%len(w.Nodes)].Name),
			Conditions: discovery.EndpointConditions{
				Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
		})
	}
	return es
}

// ReplaceEndpoint is the change of a partial sync: the last endpoint of
// slice gets a fresh address (number gen counts from 1), as when a pod is
// replaced.
func (w Workload) ReplaceEndpoint(slice *discovery.EndpointSlice, gen int) {
	ip := addrAdd(lastAddr(w.ClusterCIDR), ^uint32(gen)) // last - gen - 1
	slice.Endpoints[len(slice.Endpoints)-1].Addresses = []string{ip.String()}
}

// parallel runs fn(i) for i in [0, n) on workers goroutines and returns
// the errors joined (at most a few, then it stops).
func parallel(parent context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	next := make(chan int)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					mu.Lock()
					errs = append(errs, err)
					if len(errs) >= 5 {
						cancel()
					}
					mu.Unlock()
				}
			}
		})
	}
loop:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break loop
		}
	}
	close(next)
	wg.Wait()
	if len(errs) == 0 && parent.Err() != nil {
		return parent.Err()
	}
	return errors.Join(errs...)
}

// Setup creates the namespace and the Nodes (with their InternalIPs).
func (w Workload) Setup(ctx context.Context, client kubernetes.Interface) error {
	_, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.Namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", w.Namespace, err)
	}
	for _, n := range w.Nodes {
		_, err := client.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name,
			Labels: map[string]string{v1.LabelHostname: n.Name}}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node %s: %w", n.Name, err)
		}
		// The controller manager updates new Nodes too (taints, pod CIDR).
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			node, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			node.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: n.IP.String()}, {Type: v1.NodeHostName, Address: n.Name}}
			_, err = client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("set addresses of node %s: %w", n.Name, err)
		}
	}
	return nil
}

// Scale makes the namespace hold exactly Services 0..n-1 and their
// EndpointSlices, creating and deleting in parallel; it returns how many
// objects it created and deleted.
func (w Workload) Scale(ctx context.Context, client kubernetes.Interface, n, workers int) (created, deleted int, err error) {
	if err := w.Validate(n); err != nil {
		return 0, 0, err
	}
	svcs, err := client.CoreV1().Services(w.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, fmt.Errorf("list Services: %w", err)
	}
	slices, err := client.DiscoveryV1().EndpointSlices(w.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, fmt.Errorf("list EndpointSlices: %w", err)
	}
	haveSvc, haveSlice := map[string]bool{}, map[string]bool{}
	var extraSvcs, extraSlices []string
	for _, s := range svcs.Items {
		haveSvc[s.Name] = true
		if i := serviceIndex(s.Name); i < 0 || i >= n {
			extraSvcs = append(extraSvcs, s.Name)
		}
	}
	for _, s := range slices.Items {
		haveSlice[s.Name] = true
		if i := serviceIndex(strings.TrimSuffix(s.Name, "-0")); i < 0 || i >= n {
			extraSlices = append(extraSlices, s.Name)
		}
	}
	var mu sync.Mutex
	count := func(c, d int) {
		mu.Lock()
		created, deleted = created+c, deleted+d
		mu.Unlock()
	}
	err = parallel(ctx, n, workers, func(ctx context.Context, i int) error {
		if !haveSvc[ServiceName(i)] {
			if _, err := client.CoreV1().Services(w.Namespace).Create(ctx, w.Service(i), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create Service %s: %w", ServiceName(i), err)
			}
			count(1, 0)
		}
		if es := w.EndpointSlice(i); !haveSlice[es.Name] {
			if _, err := client.DiscoveryV1().EndpointSlices(w.Namespace).Create(ctx, es, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create EndpointSlice %s: %w", es.Name, err)
			}
			count(1, 0)
		}
		return nil
	})
	if err != nil {
		return created, deleted, err
	}
	err = parallel(ctx, len(extraSvcs)+len(extraSlices), workers, func(ctx context.Context, i int) error {
		var err error
		if i < len(extraSvcs) {
			err = client.CoreV1().Services(w.Namespace).Delete(ctx, extraSvcs[i], metav1.DeleteOptions{})
		} else {
			err = client.DiscoveryV1().EndpointSlices(w.Namespace).Delete(ctx, extraSlices[i-len(extraSvcs)], metav1.DeleteOptions{})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete: %w", err)
		}
		count(0, 1)
		return nil
	})
	return created, deleted, err
}

// Objects is what the API server holds: every Service, EndpointSlice and
// Node, and the ServiceCIDRs.
type Objects struct {
	Services       []*v1.Service
	EndpointSlices []*discovery.EndpointSlice
	Nodes          []*v1.Node
	ServiceCIDRs   []string
}

// ReadObjects lists the objects the proxiers see.
func ReadObjects(ctx context.Context, client kubernetes.Interface) (*Objects, error) {
	out := &Objects{}
	svcs, err := client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list Services: %w", err)
	}
	for i := range svcs.Items {
		out.Services = append(out.Services, &svcs.Items[i])
	}
	slices, err := client.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list EndpointSlices: %w", err)
	}
	for i := range slices.Items {
		out.EndpointSlices = append(out.EndpointSlices, &slices.Items[i])
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list Nodes: %w", err)
	}
	for i := range nodes.Items {
		out.Nodes = append(out.Nodes, &nodes.Items[i])
	}
	cidrs, err := client.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list ServiceCIDRs: %w", err)
	}
	for _, c := range cidrs.Items {
		out.ServiceCIDRs = append(out.ServiceCIDRs, c.Spec.CIDRs...)
	}
	return out, nil
}

// Slice returns the EndpointSlice namespace/name, or nil.
func (o *Objects) Slice(namespace, name string) *discovery.EndpointSlice {
	for _, s := range o.EndpointSlices {
		if s.Namespace == namespace && s.Name == name {
			return s
		}
	}
	return nil
}

// Manifest is the objects as the multi-document YAML that "svclab proxier
// run --objects" reads, one document per object, so that changing an
// EndpointSlice re-marshals only that one.
type Manifest struct {
	docs   [][]byte
	slices map[string]int // namespace/name → index in docs
}

func marshalDoc(obj runtime.Object, meta *metav1.ObjectMeta) ([]byte, error) {
	meta.ManagedFields = nil
	y, err := yaml.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("marshal %s/%s: %w", meta.Namespace, meta.Name, err)
	}
	return append([]byte("---\n"), y...), nil
}

func sliceDoc(s *discovery.EndpointSlice) ([]byte, error) {
	s = s.DeepCopy()
	s.TypeMeta = metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"}
	return marshalDoc(s, &s.ObjectMeta)
}

// Manifest marshals the objects.
func (o *Objects) Manifest() (*Manifest, error) {
	m := &Manifest{slices: map[string]int{}}
	for _, s := range o.Services {
		s = s.DeepCopy()
		s.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
		d, err := marshalDoc(s, &s.ObjectMeta)
		if err != nil {
			return nil, err
		}
		m.docs = append(m.docs, d)
	}
	for _, s := range o.EndpointSlices {
		d, err := sliceDoc(s)
		if err != nil {
			return nil, err
		}
		m.slices[s.Namespace+"/"+s.Name] = len(m.docs)
		m.docs = append(m.docs, d)
	}
	for _, n := range o.Nodes {
		n = n.DeepCopy()
		n.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}
		d, err := marshalDoc(n, &n.ObjectMeta)
		if err != nil {
			return nil, err
		}
		m.docs = append(m.docs, d)
	}
	return m, nil
}

// SetSlice replaces an EndpointSlice of the manifest.
func (m *Manifest) SetSlice(s *discovery.EndpointSlice) error {
	i, ok := m.slices[s.Namespace+"/"+s.Name]
	if !ok {
		return fmt.Errorf("manifest: no EndpointSlice %s/%s", s.Namespace, s.Name)
	}
	d, err := sliceDoc(s)
	if err != nil {
		return err
	}
	m.docs[i] = d
	return nil
}

// WriteFile writes the manifest to path atomically (a proxier watching
// the file never reads half of it).
func (m *Manifest) WriteFile(path string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, bytes.Join(m.docs, nil), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

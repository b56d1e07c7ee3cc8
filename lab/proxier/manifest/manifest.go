package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	netutils "k8s.io/utils/net"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Objects are the API objects read from a manifest, in file order.
type Objects struct {
	Services       []*v1.Service
	EndpointSlices []*discovery.EndpointSlice
	Nodes          []*v1.Node
}

// Node returns the Node named name, or nil.
func (o *Objects) Node(name string) *v1.Node {
	for _, n := range o.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// DocumentError locates a problem in a manifest.
type DocumentError struct {
	Source   string // file name
	Line     int    // first line of the document (1-based)
	Document int    // document number (1-based)
	Object   string // "Kind namespace/name", if known
	Field    string // JSON path of the offending field, if known
	Err      error
}

func (e *DocumentError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%d: document %d", e.Source, e.Line, e.Document)
	if e.Object != "" {
		fmt.Fprintf(&b, " (%s)", e.Object)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *DocumentError) Unwrap() error { return e.Err }

type document struct {
	line int
	data []byte
}

// splitDocuments splits a multi-document YAML stream on "---" lines.
func splitDocuments(r io.Reader) ([]document, error) {
	var docs []document
	var cur bytes.Buffer
	start, lineNo := 1, 0
	flush := func(next int) {
		if strings.TrimSpace(stripComments(cur.String())) != "" {
			docs = append(docs, document{line: start, data: bytes.Clone(cur.Bytes())})
		}
		cur.Reset()
		start = next
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if line == "---" || strings.HasPrefix(line, "--- ") || line == "..." {
			flush(lineNo + 1)
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	flush(lineNo + 1)
	return docs, nil
}

func stripComments(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// Decode reads Services, EndpointSlices and Nodes (also inside a v1 List)
// from a multi-document YAML stream. source names the stream in errors.
// Unknown fields, other kinds and invalid addresses are errors that name the
// document and the field.
func Decode(r io.Reader, source string) (*Objects, error) {
	docs, err := splitDocuments(r)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", source, err)
	}
	out := &Objects{}
	var errs []error
	for i, d := range docs {
		if err := decodeDocument(out, d.data, ""); err != nil {
			var de *DocumentError
			if !errors.As(err, &de) {
				de = &DocumentError{Err: err}
			}
			de.Source, de.Line, de.Document = source, d.line, i+1
			errs = append(errs, de)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func decodeDocument(out *Objects, data []byte, pathPrefix string) error {
	var tm typeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return &DocumentError{Field: pathPrefix, Err: fmt.Errorf("not a YAML object: %w", err)}
	}
	if tm.Kind == "" {
		return &DocumentError{Field: pathPrefix + "kind", Err: errors.New("missing")}
	}
	switch gvk := tm.APIVersion + "/" + tm.Kind; gvk {
	case "v1/List":
		var list struct {
			typeMeta `json:",inline"`
			Items    []rawItem `json:"items"`
		}
		if err := yaml.Unmarshal(data, &list); err != nil {
			return &DocumentError{Field: pathPrefix + "items", Err: err}
		}
		for i, item := range list.Items {
			if err := decodeDocument(out, item, fmt.Sprintf("%sitems[%d].", pathPrefix, i)); err != nil {
				return err
			}
		}
		return nil
	case "v1/Service":
		svc := &v1.Service{}
		if err := strict(data, svc, pathPrefix); err != nil {
			return err
		}
		obj := "Service " + svc.Namespace + "/" + svc.Name
		if err := validateService(svc); err != nil {
			return withObject(err, obj, pathPrefix)
		}
		out.Services = append(out.Services, svc)
	case "discovery.k8s.io/v1/EndpointSlice":
		es := &discovery.EndpointSlice{}
		if err := strict(data, es, pathPrefix); err != nil {
			return err
		}
		obj := "EndpointSlice " + es.Namespace + "/" + es.Name
		if err := validateEndpointSlice(es); err != nil {
			return withObject(err, obj, pathPrefix)
		}
		out.EndpointSlices = append(out.EndpointSlices, es)
	case "v1/Node":
		n := &v1.Node{}
		if err := strict(data, n, pathPrefix); err != nil {
			return err
		}
		if n.Name == "" {
			return &DocumentError{Object: "Node", Field: pathPrefix + "metadata.name", Err: errors.New("missing")}
		}
		out.Nodes = append(out.Nodes, n)
	default:
		return &DocumentError{Field: pathPrefix + "kind", Err: fmt.Errorf("unsupported apiVersion/kind %q (want v1 Service, discovery.k8s.io/v1 EndpointSlice, v1 Node or v1 List)", strings.TrimPrefix(gvk, "/"))}
	}
	return nil
}

// rawItem is a raw list item (sigs.k8s.io/yaml converts YAML to JSON first).
type rawItem []byte

func (j *rawItem) UnmarshalJSON(b []byte) error {
	*j = bytes.Clone(b)
	return nil
}

// strict decodes data into into, rejecting unknown and duplicate fields
// with errors that carry the field path.
func strict(data []byte, into any, pathPrefix string) error {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return &DocumentError{Field: strings.TrimSuffix(pathPrefix, "."), Err: err}
	}
	strictErrs, err := kjson.UnmarshalStrict(js, into, kjson.DisallowUnknownFields, kjson.DisallowDuplicateFields)
	if err != nil {
		return &DocumentError{Field: strings.TrimSuffix(pathPrefix, "."), Err: err}
	}
	if len(strictErrs) > 0 {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Namespace string `json:"namespace"`
				Name      string `json:"name"`
			} `json:"metadata"`
		}
		_ = yaml.Unmarshal(data, &obj)
		name := obj.Metadata.Name
		if obj.Metadata.Namespace != "" {
			name = obj.Metadata.Namespace + "/" + name
		}
		return &DocumentError{Object: strings.TrimSpace(obj.Kind + " " + name), Field: strings.TrimSuffix(pathPrefix, "."), Err: errors.Join(strictErrs...)}
	}
	return nil
}

func withObject(err error, obj, pathPrefix string) error {
	var fe *fieldError
	if errors.As(err, &fe) {
		return &DocumentError{Object: obj, Field: pathPrefix + fe.field, Err: fe.err}
	}
	return &DocumentError{Object: obj, Err: err}
}

type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.field + ": " + e.err.Error() }

func fieldErr(field, format string, args ...any) error {
	return &fieldError{field: field, err: fmt.Errorf(format, args...)}
}

func checkIP(field, s string) error {
	if netutils.ParseIPSloppy(s) == nil {
		return fieldErr(field, "%q is not an IP address", s)
	}
	return nil
}

func checkProtocol(field string, p v1.Protocol) error {
	switch p {
	case "", v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP:
		return nil
	}
	return fieldErr(field, "unsupported protocol %q (want TCP, UDP or SCTP)", p)
}

func checkPort(field string, p int32, allowZero bool) error {
	if (p == 0 && allowZero) || (p >= 1 && p <= 65535) {
		return nil
	}
	return fieldErr(field, "port %d out of range 1-65535", p)
}

func validateService(svc *v1.Service) error {
	if svc.Name == "" {
		return fieldErr("metadata.name", "missing")
	}
	if svc.Namespace == "" {
		return fieldErr("metadata.namespace", "missing")
	}
	switch svc.Spec.Type {
	case "", v1.ServiceTypeClusterIP, v1.ServiceTypeNodePort, v1.ServiceTypeLoadBalancer, v1.ServiceTypeExternalName:
	default:
		return fieldErr("spec.type", "unknown type %q", svc.Spec.Type)
	}
	if ip := svc.Spec.ClusterIP; ip != "" && ip != v1.ClusterIPNone {
		if err := checkIP("spec.clusterIP", ip); err != nil {
			return err
		}
	}
	for i, ip := range svc.Spec.ClusterIPs {
		if ip != v1.ClusterIPNone {
			if err := checkIP(fmt.Sprintf("spec.clusterIPs[%d]", i), ip); err != nil {
				return err
			}
		}
	}
	for i, ip := range svc.Spec.ExternalIPs {
		if err := checkIP(fmt.Sprintf("spec.externalIPs[%d]", i), ip); err != nil {
			return err
		}
	}
	for i, c := range svc.Spec.LoadBalancerSourceRanges {
		if _, _, err := netutils.ParseCIDRSloppy(strings.TrimSpace(c)); err != nil {
			return fieldErr(fmt.Sprintf("spec.loadBalancerSourceRanges[%d]", i), "%q is not a CIDR", c)
		}
	}
	for i, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.IP != "" {
			if err := checkIP(fmt.Sprintf("status.loadBalancer.ingress[%d].ip", i), ing.IP); err != nil {
				return err
			}
		}
	}
	names := map[string]bool{}
	for i, p := range svc.Spec.Ports {
		f := fmt.Sprintf("spec.ports[%d]", i)
		if err := checkPort(f+".port", p.Port, false); err != nil {
			return err
		}
		if err := checkPort(f+".nodePort", p.NodePort, true); err != nil {
			return err
		}
		if err := checkProtocol(f+".protocol", p.Protocol); err != nil {
			return err
		}
		if len(svc.Spec.Ports) > 1 && p.Name == "" {
			return fieldErr(f+".name", "required when a Service has more than one port")
		}
		key := p.Name + "/" + string(p.Protocol)
		if names[key] {
			return fieldErr(f+".name", "duplicate port name %q for protocol %s", p.Name, p.Protocol)
		}
		names[key] = true
	}
	return nil
}

func validateEndpointSlice(es *discovery.EndpointSlice) error {
	if es.Name == "" {
		return fieldErr("metadata.name", "missing")
	}
	if es.Namespace == "" {
		return fieldErr("metadata.namespace", "missing")
	}
	if es.Labels[discovery.LabelServiceName] == "" {
		return fieldErr("metadata.labels", "missing label %s naming the Service", discovery.LabelServiceName)
	}
	switch es.AddressType {
	case discovery.AddressTypeIPv4, discovery.AddressTypeIPv6, discovery.AddressTypeFQDN:
	case "":
		return fieldErr("addressType", "missing (want IPv4, IPv6 or FQDN)")
	default:
		return fieldErr("addressType", "unknown address type %q", es.AddressType)
	}
	for i, p := range es.Ports {
		f := fmt.Sprintf("ports[%d]", i)
		if p.Port != nil {
			if err := checkPort(f+".port", *p.Port, false); err != nil {
				return err
			}
		}
		if p.Protocol != nil {
			if err := checkProtocol(f+".protocol", *p.Protocol); err != nil {
				return err
			}
		}
	}
	if es.AddressType == discovery.AddressTypeFQDN {
		return nil
	}
	for i, ep := range es.Endpoints {
		for j, a := range ep.Addresses {
			if err := checkIP(fmt.Sprintf("endpoints[%d].addresses[%d]", i, j), a); err != nil {
				return err
			}
		}
	}
	return nil
}

package cluster

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// CurlStatusMark ends the output of a request NodeHTTP sends with curl on a
// node: curl writes it, then the answer's status code, after the body.
const CurlStatusMark = "\n@@svclab-status="

// maxNodeHTTPBody bounds the body of a request NodeHTTP sends with curl
// (it goes on curl's command line).
const maxNodeHTTPBody = 64 << 10

// NodeHTTP returns an http.RoundTripper that sends requests from node's
// network, to its loopback services (the proxier's 127.0.0.1:10249): with
// svclab's own HTTP client in the node's network namespace where c is a
// NetnsCluster, else with curl on the node (NodeExec), whose output it
// turns back into the answer. No connection is kept; the caller's context
// bounds each request (curl's own -m 5 too).
func NodeHTTP(c Cluster, node string) (http.RoundTripper, error) {
	if nc, ok := c.(NetnsCluster); ok {
		ns, err := nc.NodeNetns(node)
		if err != nil {
			return nil, err
		}
		return &http.Transport{DisableKeepAlives: true, Proxy: nil, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return ns.DialFrom(ctx, network, "", addr)
		}}, nil
	}
	return nodeCurl{c: c, node: node}, nil
}

// nodeCurl sends a request with curl on a node.
type nodeCurl struct {
	c    Cluster
	node string
}

func (t nodeCurl) RoundTrip(req *http.Request) (*http.Response, error) {
	args := []string{"curl", "-sS", "-m", "5", "-X", req.Method, "-w", CurlStatusMark + "%{http_code}"}
	for _, k := range slices.Sorted(maps.Keys(req.Header)) {
		for _, v := range req.Header[k] {
			if strings.ContainsAny(k+v, "\r\n") {
				return nil, fmt.Errorf("header %q: a line break", k)
			}
			args = append(args, "-H", k+": "+v)
		}
	}
	if req.Body != nil {
		b, err := io.ReadAll(io.LimitReader(req.Body, maxNodeHTTPBody+1))
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		if len(b) > maxNodeHTTPBody {
			return nil, fmt.Errorf("a request body of more than %d bytes", maxNodeHTTPBody)
		}
		if len(b) > 0 {
			// --data-raw: a body starting with @ is not a file name.
			args = append(args, "--data-raw", string(b))
		}
	}
	args = append(args, req.URL.String())
	out, err := DataplaneOutput(req.Context(), t.c, t.node, args...)
	if err != nil {
		return nil, err
	}
	body, code, ok := cutLast(out, CurlStatusMark)
	status, _ := strconv.Atoi(strings.TrimSpace(code))
	if !ok || status < 100 || status > 999 {
		return nil, fmt.Errorf("curl on node %s got no HTTP answer from %s", t.node, req.URL.Redacted())
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)),
		Request: req,
	}, nil
}

// cutLast cuts s around the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

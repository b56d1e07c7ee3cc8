package cluster

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"k8s.io/client-go/rest"
)

// MaxAPIResponse bounds what svclab reads of one answer (a list, an
// object) of a lab's API server, whose answers the lab controls: a learner
// with cluster-admin can fill it with objects up to its store's quota. A
// lab past it gets an error naming the bound, not a server that reads
// without end. (client-go bounds each event of a watch itself, to 16 MiB;
// a watch as a whole is endless by design.)
const MaxAPIResponse = 64 << 20

// ErrAPIResponseTooLarge is the error of an answer past MaxAPIResponse.
var ErrAPIResponseTooLarge = errors.New("the lab's API server answered with more than svclab reads: the lab holds too many or too large objects of this kind")

// BoundAnswers makes cfg's clients read no more than MaxAPIResponse of an
// answer (RESTConfigFromKubeconfig's do already): for svclab's processes
// that make their clients from a kubeconfig file of a lab.
func BoundAnswers(cfg *rest.Config) { cfg.Wrap(capResponses) }

// capResponses bounds the bodies of rt's answers.
func capResponses(rt http.RoundTripper) http.RoundTripper { return capTransport{rt} }

type capTransport struct{ rt http.RoundTripper }

func (t capTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	switch strings.ToLower(req.URL.Query().Get("watch")) {
	case "true", "1":
	default:
		resp.Body = &cappedBody{rc: resp.Body, max: MaxAPIResponse, what: fmt.Sprintf("over %d MiB for %s", MaxAPIResponse>>20, req.URL.Path)}
	}
	return resp, nil
}

func (t capTransport) WrappedRoundTripper() http.RoundTripper { return t.rt }

// cappedBody fails once more than max bytes came.
type cappedBody struct {
	rc   io.ReadCloser
	max  int64
	what string
	n    int64
	err  error
}

func (c *cappedBody) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.rc.Read(p)
	c.n += int64(n)
	if c.n > c.max {
		c.err = fmt.Errorf("%w (%s)", ErrAPIResponseTooLarge, c.what)
		return 0, c.err
	}
	return n, err
}

func (c *cappedBody) Close() error { return c.rc.Close() }

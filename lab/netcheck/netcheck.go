package netcheck

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// Dialer opens connections somewhere (cluster.Netns: inside a lab), from
// the local address local ("" for any).
type Dialer interface {
	DialFrom(ctx context.Context, network, local, address string) (net.Conn, error)
}

// Outcomes of an attempt.
const (
	Success    = "success"
	Refused    = "refused"
	Timeout    = "timeout"
	DNSFailure = "dns-failure"
	Error      = "error"
)

// Probe is one attempt's description.
type Probe struct {
	// Protocol is http, tcp (the handshake only), udp (a line sent, one
	// answer awaited) or dns (an A query for Query).
	Protocol string
	Host     string
	Port     int
	// Path is the HTTP request's path ("/" when empty).
	Path string
	// Query is the name a dns probe asks for.
	Query string
	// SourcePort, when set, is the local port of a udp or dns probe.
	SourcePort int
	// Timeout bounds the attempt; Connect the TCP handshake within it.
	Timeout, Connect time.Duration
	// Payload is what a udp probe sends ("hostname\n", which agnhost's
	// UDP server answers with its Pod's name, when empty).
	Payload string
}

// Result is an attempt's outcome.
type Result struct {
	Outcome string
	// Body is the answer: the HTTP body (at most MaxBody bytes, trimmed),
	// the UDP reply, the DNS answers (one per line, as dig +short).
	Body string
	// Detail says what went wrong, in the words of the error.
	Detail   string
	Duration time.Duration
}

// MaxBody bounds what an attempt reads of an answer.
const MaxBody = 64 << 10

// Run makes the attempt from d.
func (p Probe) Run(ctx context.Context, d Dialer) Result {
	start := time.Now()
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var r Result
	switch p.Protocol {
	case "http":
		r = p.http(ctx, d)
	case "tcp":
		r = p.tcp(ctx, d)
	case "udp":
		r = p.udp(ctx, d)
	case "dns":
		r = p.dns(ctx, d)
	default:
		r = Result{Outcome: Error, Detail: fmt.Sprintf("unknown probe protocol %q", p.Protocol)}
	}
	r.Duration = time.Since(start)
	return r
}

func (p Probe) addr() string { return net.JoinHostPort(p.Host, strconv.Itoa(p.Port)) }

func (p Probe) connectTimeout() time.Duration {
	if p.Connect > 0 {
		return p.Connect
	}
	return time.Second
}

func (p Probe) dial(ctx context.Context, d Dialer) (net.Conn, error) {
	cctx, cancel := context.WithTimeout(ctx, p.connectTimeout())
	defer cancel()
	return d.DialFrom(cctx, "tcp", "", p.addr())
}

func (p Probe) tcp(ctx context.Context, d Dialer) Result {
	c, err := p.dial(ctx, d)
	if err != nil {
		return classify(err)
	}
	c.Close()
	return Result{Outcome: Success}
}

func (p Probe) http(ctx context.Context, d Dialer) Result {
	path := p.Path
	if path == "" {
		path = "/"
	}
	tr := &http.Transport{
		DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return p.dial(ctx, d) },
		DisableKeepAlives: true,
		Proxy:             nil,
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr()+path, nil)
	if err != nil {
		return Result{Outcome: Error, Detail: err.Error()}
	}
	req.Header.Set("User-Agent", "svclab-probe")
	resp, err := tr.RoundTrip(req)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return Result{Outcome: Error, Detail: NoHTTPAnswer}
	}
	if err != nil {
		return classify(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody))
	if err != nil && len(b) == 0 {
		return classify(err)
	}
	// Any status is an answer (curl without -f): the Service reached a
	// backend.
	return Result{Outcome: Success, Body: strings.TrimSpace(string(b))}
}

func (p Probe) udp(ctx context.Context, d Dialer) Result {
	// A connected socket, as nc's: an ICMP port unreachable comes back
	// as a refusal.
	c, err := d.DialFrom(ctx, "udp4", p.local(), p.addr())
	if err != nil {
		return classify(err)
	}
	defer c.Close()
	payload := p.Payload
	if payload == "" {
		payload = "hostname\n"
	}
	deadline, _ := ctx.Deadline()
	c.SetDeadline(deadline)
	if _, err := c.Write([]byte(payload)); err != nil {
		return classify(err)
	}
	buf := make([]byte, MaxBody)
	n, err := c.Read(buf)
	if err != nil {
		return classify(err)
	}
	return Result{Outcome: Success, Body: strings.TrimSpace(string(buf[:n]))}
}

// local is the local address of a udp or dns probe.
func (p Probe) local() string {
	if p.SourcePort == 0 {
		return ""
	}
	return net.JoinHostPort("0.0.0.0", strconv.Itoa(p.SourcePort))
}

func (p Probe) dns(ctx context.Context, d Dialer) Result {
	answers, err := Lookup(ctx, d, p.addr(), p.Query, p.SourcePort)
	if errors.Is(err, ErrNoAnswer) {
		return Result{Outcome: DNSFailure, Detail: err.Error()}
	}
	switch {
	case errors.Is(err, ErrNXDomain):
		return Result{Outcome: DNSFailure, Detail: err.Error()}
	case err != nil:
		return classify(err)
	case len(answers) == 0:
		return Result{Outcome: DNSFailure, Detail: "no answer for " + p.Query}
	}
	return Result{Outcome: Success, Body: strings.Join(answers, "\n")}
}

// ErrNXDomain is returned by Lookup for a name that does not exist.
var ErrNXDomain = errors.New("NXDOMAIN")

// Lookup asks server (ip:port) for the A records of name over UDP, from
// sourcePort (any when 0), and returns the addresses.
func Lookup(ctx context.Context, d Dialer, server, name string, sourcePort int) ([]string, error) {
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	qname, err := dnsmessage.NewName(name)
	if err != nil {
		return nil, fmt.Errorf("the name %q: %w", name, err)
	}
	var idb [2]byte
	rand.Read(idb[:])
	id := binary.BigEndian.Uint16(idb[:])
	msg := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: id, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: qname, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}},
	}
	q, err := msg.Pack()
	if err != nil {
		return nil, err
	}
	local := ""
	if sourcePort != 0 {
		local = net.JoinHostPort("0.0.0.0", strconv.Itoa(sourcePort))
	}
	c, err := d.DialFrom(ctx, "udp4", local, server)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if deadline, ok := ctx.Deadline(); ok {
		c.SetDeadline(deadline)
	}
	if _, err := c.Write(q); err != nil {
		return nil, err
	}
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return nil, err
		}
		var resp dnsmessage.Message
		if err := resp.Unpack(buf[:n]); err != nil || resp.Header.ID != id || !resp.Header.Response {
			continue // not our answer
		}
		switch resp.Header.RCode {
		case dnsmessage.RCodeSuccess:
		case dnsmessage.RCodeNameError:
			return nil, fmt.Errorf("%s: %w", strings.TrimSuffix(name, "."), ErrNXDomain)
		default:
			return nil, fmt.Errorf("%w: the DNS server answered %s for %s", ErrNoAnswer, resp.Header.RCode, strings.TrimSuffix(name, "."))
		}
		var out []string
		for _, a := range resp.Answers {
			if r, ok := a.Body.(*dnsmessage.AResource); ok {
				out = append(out, net.IP(r.A[:]).String())
			}
		}
		return out, nil
	}
}

// ErrNoAnswer is returned by Lookup when the server answers with an error
// (SERVFAIL, REFUSED).
var ErrNoAnswer = errors.New("no answer")

// classify reads a socket error as curl, nc or dig would report it.
func classify(err error) Result {
	detail := err.Error()
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return Result{Outcome: Refused, Detail: detail}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return Result{Outcome: Timeout, Detail: "no answer in time"}
	}
	return Result{Outcome: Error, Detail: detail}
}

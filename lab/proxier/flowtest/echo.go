package flowtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/ipv4"
)

// EchoServer answers every TCP connection and every UDP datagram on its
// ports with one line: "<name> <peer address:port>". The peer is what the
// backend saw, i.e. after any masquerading.
type EchoServer struct {
	Name string
	log  *slog.Logger

	mu     sync.Mutex
	tcp    []net.Listener
	udp    []net.PacketConn
	closed bool
	wg     sync.WaitGroup
}

// StartEcho listens on 0.0.0.0 in ns on the given TCP and UDP ports.
func StartEcho(ns Netns, name string, tcpPorts, udpPorts []int, log *slog.Logger) (*EchoServer, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &EchoServer{Name: name, log: log.With("echo", name)}
	err := ns.Do(func() error {
		for _, p := range tcpPorts {
			l, err := net.Listen("tcp4", fmt.Sprintf("0.0.0.0:%d", p))
			if err != nil {
				return fmt.Errorf("echo %s: %w", name, err)
			}
			s.tcp = append(s.tcp, l)
		}
		for _, p := range udpPorts {
			c, err := net.ListenPacket("udp4", fmt.Sprintf("0.0.0.0:%d", p))
			if err != nil {
				return fmt.Errorf("echo %s: %w", name, err)
			}
			s.udp = append(s.udp, c)
		}
		return nil
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	for _, l := range s.tcp {
		s.wg.Go(func() { s.serveTCP(l) })
	}
	for _, c := range s.udp {
		s.wg.Go(func() { s.serveUDP(c) })
	}
	return s, nil
}

func (s *EchoServer) serveTCP(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.log.Warn("accept failed", "err", err)
			}
			return
		}
		s.wg.Go(func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprintf(c, "%s %s\n", s.Name, c.RemoteAddr())
		})
	}
}

// serveUDP answers each datagram from the address it was sent to, so
// that the reply matches the client's connected socket even where the
// namespace has several addresses.
func (s *EchoServer) serveUDP(c net.PacketConn) {
	pc := ipv4.NewPacketConn(c)
	if err := pc.SetControlMessage(ipv4.FlagDst, true); err != nil {
		s.log.Warn("cannot learn destination addresses", "err", err)
	}
	buf := make([]byte, 1500)
	for {
		_, cm, peer, err := pc.ReadFrom(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.log.Warn("read failed", "err", err)
			}
			return
		}
		var reply *ipv4.ControlMessage
		if cm != nil && cm.Dst != nil {
			reply = &ipv4.ControlMessage{Src: cm.Dst}
		}
		if _, err := pc.WriteTo(fmt.Appendf(nil, "%s %s\n", s.Name, peer), reply, peer); err != nil {
			s.log.Warn("reply failed", "err", err)
		}
	}
}

// Close stops the server and waits for its goroutines.
func (s *EchoServer) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	var errs []error
	for _, l := range s.tcp {
		errs = append(errs, l.Close())
	}
	for _, c := range s.udp {
		errs = append(errs, c.Close())
	}
	s.wg.Wait()
	return errors.Join(errs...)
}

// Outcome is what happened to a probe.
type Outcome string

// Probe outcomes.
const (
	// Reached: a backend answered.
	Reached Outcome = "reached"
	// Refused: connection refused (TCP RST or ICMP port unreachable,
	// which is what REJECT sends).
	Refused Outcome = "refused"
	// TimedOut: no answer within the timeout (DROP).
	TimedOut Outcome = "timed out"
	// Failed: anything else (unreachable network, bad reply, ...).
	Failed Outcome = "failed"
)

// Result is the outcome of one probe.
type Result struct {
	Outcome Outcome
	// Backend is the name of the echo server that answered.
	Backend string
	// Peer is the source address the backend saw.
	Peer netip.AddrPort
	// Err is the error behind Refused, TimedOut and Failed.
	Err error
}

func (r Result) String() string {
	if r.Outcome == Reached {
		return fmt.Sprintf("reached %s (saw %s)", r.Backend, r.Peer)
	}
	return fmt.Sprintf("%s: %v", r.Outcome, r.Err)
}

// Probe opens a new connection (TCP) or socket (UDP) in ns, from src (any
// address if invalid) to dst, and reads the echo line. proto is "tcp" or
// "udp". Every probe uses a fresh source port, so it is a new conntrack
// entry and goes through the NAT rules again.
func Probe(ctx context.Context, ns Netns, proto string, src netip.Addr, dst netip.AddrPort, timeout time.Duration) Result {
	deadline := time.Now().Add(timeout)
	var conn net.Conn
	err := ns.Do(func() error {
		d := net.Dialer{Deadline: deadline}
		if src.IsValid() {
			switch proto {
			case "tcp":
				d.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))
			case "udp":
				d.LocalAddr = net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0))
			}
		}
		var err error
		conn, err = d.DialContext(ctx, proto+"4", dst.String())
		return err
	})
	if err != nil {
		return classify(err)
	}
	defer conn.Close()
	conn.SetDeadline(deadline)
	if proto == "udp" {
		if _, err := conn.Write([]byte("ping\n")); err != nil {
			return classify(err)
		}
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return classify(err)
	}
	name, peer, ok := strings.Cut(strings.TrimSpace(line), " ")
	if !ok {
		return Result{Outcome: Failed, Err: fmt.Errorf("bad echo reply %q", line)}
	}
	ap, err := netip.ParseAddrPort(peer)
	if err != nil {
		return Result{Outcome: Failed, Err: fmt.Errorf("bad echo reply %q: %w", line, err)}
	}
	return Result{Outcome: Reached, Backend: name, Peer: ap}
}

func classify(err error) Result {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return Result{Outcome: Refused, Err: err}
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return Result{Outcome: TimedOut, Err: err}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return Result{Outcome: TimedOut, Err: err}
	}
	return Result{Outcome: Failed, Err: err}
}

package agnhost

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// boomServerCommand is upstream's regression-issue-74839 image (the
// "boom-server" of [sig-network] Conntrack's invalid conntrack state spec):
// a TCP server on port 9000 that, on each connection's final handshake
// ACK, injects through a raw socket a segment whose sequence number is out
// of the window. Behind a DNAT, conntrack marks that segment INVALID; a
// proxy that lets INVALID packets through un-NATed hands it to the client,
// which answers with an RST, and the server logs "ERROR: RST received".
// It needs CAP_NET_RAW and the Pod's addresses in POD_IP or POD_IPS.
func boomServerCommand(ctx context.Context, e env, logger *log.Logger) *cobra.Command {
	var port int
	cmd := &cobra.Command{
		Use:    "boom-server",
		Short:  "Injects out-of-window TCP segments into its connections (upstream's regression-issue-74839 image)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			ips := boomServerIPs(e.environ())
			if len(ips) == 0 {
				return errors.New("no valid IP found in POD_IPS or POD_IP")
			}
			// The raw sockets first: they must see the first SYN.
			var raws []*net.IPConn
			for _, ip := range ips {
				logger.Printf("external ip: %v", ip)
				conn, err := net.ListenIP(ipNetwork(ip), &net.IPAddr{IP: ip})
				if err != nil {
					return fmt.Errorf("opening a raw TCP socket on %s (it needs CAP_NET_RAW): %w", ip, err)
				}
				defer conn.Close()
				raws = append(raws, conn)
			}
			ln, err := e.listen("tcp", port)
			if err != nil {
				return err
			}
			defer ln.Close()
			bound := ln.Addr().(*net.TCPAddr).Port
			for i, conn := range raws {
				go boomProbe(logger, conn, ips[i], uint16(bound))
			}
			logger.Printf("listen on %v:%d", "0.0.0.0", bound)
			go func() {
				<-ctx.Done()
				ln.Close()
			}()
			for {
				c, err := ln.Accept()
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					return err
				}
				// Upstream closes each connection after 10 seconds.
				go func() {
					select {
					case <-time.After(10 * time.Second):
					case <-ctx.Done():
					}
					c.Close()
				}()
			}
		},
	}
	cmd.Flags().IntVar(&port, "port", 9000, "TCP port (9000 upstream, fixed)")
	cmd.Flags().MarkHidden("port")
	return cmd
}

func ipNetwork(ip net.IP) string {
	if ip.To4() != nil {
		return "ip4:tcp"
	}
	return "ip6:tcp"
}

// boomServerIPs are the Pod's addresses from the downward API, as upstream
// reads them (POD_IPS, comma-separated, before POD_IP).
func boomServerIPs(environ []string) []net.IP {
	raw := getenv(environ, "POD_IPS")
	if raw == "" {
		raw = getenv(environ, "POD_IP")
	}
	var ips []net.IP
	for _, s := range strings.Split(raw, ",") {
		if ip := net.ParseIP(strings.TrimSpace(s)); ip != nil {
			ips = append(ips, ip)
		}
	}
	return ips
}

// boomProbe reads the TCP segments sent to ip's port and answers each
// completed handshake with an out-of-window segment, logging an RST.
func boomProbe(logger *log.Logger, conn *net.IPConn, ip net.IP, port uint16) {
	pending := map[string]uint32{}
	var buf [4096]byte
	for {
		n, addr, err := conn.ReadFrom(buf[:])
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			logger.Printf("conn.ReadFrom() error: %v", err)
			continue
		}
		pkt, data, err := decodeTCP(buf[:n])
		if err != nil {
			logger.Printf("tcp packet parse error: %v", err)
			continue
		}
		if pkt.DestPort != port {
			continue
		}
		logger.Printf("tcp packet: %+v, flag: %v, data: %v, addr: %v", pkt, pkt.flagString(), data, addr)
		key := net.JoinHostPort(addr.String(), strconv.Itoa(int(pkt.SrcPort)))
		if pkt.Flags&tcpSYN != 0 {
			pending[key] = pkt.Seq + 1
			continue
		}
		if pkt.Flags&tcpRST != 0 {
			logger.Println("ERROR: RST received")
		}
		if pkt.Flags&tcpACK == 0 {
			continue
		}
		seq, ok := pending[key]
		if !ok {
			continue
		}
		logger.Println("connection established")
		delete(pending, key)
		bad := tcpHeader{
			SrcPort:    pkt.DestPort,
			DestPort:   pkt.SrcPort,
			Ack:        seq,
			Seq:        pkt.Ack - 100000,            // out of the window
			Flags:      (5 << 12) | tcpPSH | tcpACK, // data offset 5, PSH ACK
			WindowSize: pkt.WindowSize,
		}
		remote := addr.(*net.IPAddr).IP
		if _, err := conn.WriteTo(bad.encode(ip, remote, []byte("boom!!!")), addr); err != nil {
			logger.Printf("conn.WriteTo() error: %v", err)
		} else {
			logger.Println("boom packet injected")
		}
	}
}

// TCP flags.
const (
	tcpFIN uint16 = 1 << iota
	tcpSYN
	tcpRST
	tcpPSH
	tcpACK
	tcpURG
	tcpECE
	tcpCWR
	tcpNS
)

// tcpHeader is a TCP header without options; Flags holds the data offset
// (4 bits), the reserved bits and the flags, as on the wire.
type tcpHeader struct {
	SrcPort, DestPort uint16
	Seq, Ack          uint32
	Flags, WindowSize uint16
	Checksum          uint16
	UrgentPtr         uint16
}

const tcpHeaderSize = 20

// decodeTCP reads a segment's header and returns its payload.
func decodeTCP(b []byte) (tcpHeader, []byte, error) {
	if len(b) < tcpHeaderSize {
		return tcpHeader{}, nil, fmt.Errorf("%d bytes, shorter than a TCP header", len(b))
	}
	be := binary.BigEndian
	h := tcpHeader{SrcPort: be.Uint16(b), DestPort: be.Uint16(b[2:]), Seq: be.Uint32(b[4:]), Ack: be.Uint32(b[8:]),
		Flags: be.Uint16(b[12:]), WindowSize: be.Uint16(b[14:]), Checksum: be.Uint16(b[16:]), UrgentPtr: be.Uint16(b[18:])}
	off := int(h.Flags>>12) * 4
	if off < tcpHeaderSize || off > len(b) {
		return tcpHeader{}, nil, fmt.Errorf("data offset %d outside the %d-byte segment", off, len(b))
	}
	return h, b[off:], nil
}

func (h tcpHeader) flagString() string {
	var out []string
	for _, f := range []struct {
		bit  uint16
		name string
	}{{tcpFIN, "FIN"}, {tcpSYN, "SYN"}, {tcpRST, "RST"}, {tcpPSH, "PSH"}, {tcpACK, "ACK"}, {tcpURG, "URG"}, {tcpECE, "ECE"}, {tcpCWR, "CWR"}, {tcpNS, "NS"}} {
		if h.Flags&f.bit != 0 {
			out = append(out, f.name)
		}
	}
	return strings.Join(out, " ")
}

// encode writes the segment from src to dest with data, its checksum
// computed over the pseudo-header.
func (h tcpHeader) encode(src, dest net.IP, data []byte) []byte {
	pkt := make([]byte, tcpHeaderSize, tcpHeaderSize+len(data))
	be := binary.BigEndian
	be.PutUint16(pkt, h.SrcPort)
	be.PutUint16(pkt[2:], h.DestPort)
	be.PutUint32(pkt[4:], h.Seq)
	be.PutUint32(pkt[8:], h.Ack)
	be.PutUint16(pkt[12:], h.Flags)
	be.PutUint16(pkt[14:], h.WindowSize)
	be.PutUint16(pkt[18:], h.UrgentPtr)
	sum := checksumTCP(src, dest, pkt, data)
	// The sum is kept in host (little-endian) order, as upstream's.
	pkt[16], pkt[17] = byte(sum), byte(sum>>8)
	return append(pkt, data...)
}

func checksumTCP(src, dest net.IP, header, data []byte) uint16 {
	var c checksummer
	length := len(header) + len(data)
	if src.To4() != nil {
		// src (4) | dst (4) | zero (1) | protocol (1) | TCP length (2)
		c.add(src.To4())
		c.add(dest.To4())
		c.add([]byte{0, 6, byte(length >> 8), byte(length)})
	} else {
		// src (16) | dst (16) | TCP length (4) | zero (3) | next header (1)
		c.add(src.To16())
		c.add(dest.To16())
		c.add([]byte{byte(length >> 24), byte(length >> 16), byte(length >> 8), byte(length), 0, 0, 0, 6})
	}
	c.add(header)
	c.add(data)
	return c.finalize()
}

// checksummer is the Internet checksum over bytes added in pieces (summed
// in little-endian 16-bit words, as upstream's).
type checksummer struct {
	sum     uint32
	oddByte byte
	length  int
}

func (c *checksummer) add(data []byte) {
	if len(data) == 0 {
		return
	}
	if c.length%2 > 0 {
		data = append([]byte{c.oddByte}, data...)
		c.length += len(data) - 1
	} else {
		c.length += len(data)
	}
	for i := 0; i+1 < len(data); i += 2 {
		c.sum += uint32(data[i]) + uint32(data[i+1])<<8
	}
	if c.length%2 > 0 {
		c.oddByte = data[len(data)-1]
	}
}

func (c *checksummer) finalize() uint16 {
	sum := c.sum
	if c.length%2 > 0 {
		sum += uint32(c.oddByte)
	}
	for sum>>16 > 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

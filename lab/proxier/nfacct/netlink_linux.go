package nfacct

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The NFNL_SUBSYS_ACCT messages and attributes used.
const (
	cmdNew = 0
	cmdGet = 1

	attrName    = 1
	attrPackets = 2
	attrBytes   = 3
)

// Netlink is Interface on a netlink socket. It is safe for concurrent use.
type Netlink struct {
	mu     sync.Mutex
	socket *nl.NetlinkSocket
}

// New opens the socket in the current network namespace and checks that
// the kernel supports nfacct (ErrNotSupported otherwise).
func New() (*Netlink, error) { return NewAt(netns.None()) }

// NewAt is New in the network namespace ns.
func NewAt(ns netns.NsHandle) (*Netlink, error) {
	socket, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("nfacct: netlink socket: %w", err)
	}
	n := &Netlink{socket: socket}
	if _, err := n.Get("IMayExist"); err != nil && !errors.Is(err, ErrObjectNotFound) {
		socket.Close()
		return nil, fmt.Errorf("%w: %w", ErrNotSupported, err)
	}
	return n, nil
}

// Close closes the socket.
func (n *Netlink) Close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.socket.Close()
}

func (n *Netlink) execute(cmd int, flags uint16, name string) ([][]byte, error) {
	req := &nl.NetlinkRequest{
		NlMsghdr: unix.NlMsghdr{
			Len:   uint32(unix.SizeofNlMsghdr),
			Type:  uint16(cmd | unix.NFNL_SUBSYS_ACCT<<8),
			Flags: flags,
		},
		Sockets: map[int]*nl.SocketHandle{unix.NETLINK_NETFILTER: {Socket: n.socket}},
		Data: []nl.NetlinkRequestData{
			&nl.Nfgenmsg{NfgenFamily: uint8(unix.AF_NETLINK), Version: nl.NFNETLINK_V0},
			nl.NewRtAttr(attrName, nl.ZeroTerminated(name)),
		},
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	msgs, err := req.Execute(unix.NETLINK_NETFILTER, 0)
	switch {
	case err == nil:
		return msgs, nil
	case errors.Is(err, syscall.ENOENT):
		return nil, ErrObjectNotFound
	case errors.Is(err, syscall.EBUSY): // created meanwhile
		return nil, nil
	}
	return nil, fmt.Errorf("nfacct %s: %w", name, err)
}

// Ensure is part of Interface.
func (n *Netlink) Ensure(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	c, err := n.Get(name)
	if c != nil {
		return nil
	}
	if !errors.Is(err, ErrObjectNotFound) {
		return err
	}
	_, err = n.execute(cmdNew, unix.NLM_F_REQUEST|unix.NLM_F_CREATE|unix.NLM_F_ACK, name)
	return err
}

// Get is part of Interface.
func (n *Netlink) Get(name string) (*Counter, error) {
	if len(name) > MaxLength {
		return nil, ErrNameExceedsMaxLength
	}
	msgs, err := n.execute(cmdGet, unix.NLM_F_REQUEST|unix.NLM_F_ACK, name)
	if err != nil {
		return nil, err
	}
	var c *Counter
	for _, msg := range msgs {
		if c, err = decode(msg); err != nil {
			return nil, fmt.Errorf("nfacct %s: %w", name, err)
		}
	}
	if c == nil {
		return nil, ErrObjectNotFound
	}
	return c, nil
}

// decode parses an NFNL_MSG_ACCT_NEW message (after the netlink header).
func decode(msg []byte) (*Counter, error) {
	if len(msg) < nl.SizeofNfgenmsg {
		return nil, fmt.Errorf("short message (%d bytes)", len(msg))
	}
	c := &Counter{}
	b := msg[nl.SizeofNfgenmsg:]
	for len(b) >= 4 {
		length := int(binary.NativeEndian.Uint16(b[0:]))
		typ := binary.NativeEndian.Uint16(b[2:]) & 0x3fff // without NLA_F_NESTED, NLA_F_NET_BYTEORDER
		if length < 4 || length > len(b) {
			return nil, fmt.Errorf("bad attribute length %d", length)
		}
		data := b[4:length]
		switch typ {
		case attrName:
			c.Name = string(bytes.TrimRight(data, "\x00"))
		case attrPackets:
			if len(data) != 8 {
				return nil, fmt.Errorf("packets attribute of %d bytes", len(data))
			}
			c.Packets = binary.BigEndian.Uint64(data)
		case attrBytes:
			if len(data) != 8 {
				return nil, fmt.Errorf("bytes attribute of %d bytes", len(data))
			}
			c.Bytes = binary.BigEndian.Uint64(data)
		}
		adv := (length + unix.NLA_ALIGNTO - 1) &^ (unix.NLA_ALIGNTO - 1)
		if adv > len(b) {
			break
		}
		b = b[adv:]
	}
	if c.Name == "" {
		return nil, errors.New("no name attribute")
	}
	return c, nil
}

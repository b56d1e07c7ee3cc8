package agnhost

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

func dnsSuffixCommand(e env) *cobra.Command {
	return &cobra.Command{
		Use:   "dns-suffix",
		Short: "Prints the host's DNS suffix list",
		Long:  `Prints the DNS suffixes of this host.`,
		Args:  cobra.MaximumNArgs(0),
		RunE: func(*cobra.Command, []string) error {
			return printResolvConf(e, "search", "Could not find DNS search list!")
		},
	}
}

func dnsServerListCommand(e env) *cobra.Command {
	return &cobra.Command{
		Use:   "dns-server-list",
		Short: "Prints the host's DNS Server list",
		Long:  `Prints the DNS Server list of this host.`,
		Args:  cobra.MaximumNArgs(0),
		RunE: func(*cobra.Command, []string) error {
			return printResolvConf(e, "nameserver", "Could not find DNS search list!")
		},
	}
}

// printResolvConf prints the values of the first resolv.conf line that
// starts with key, comma-separated, as upstream; upstream panics (exit
// code 2) when there is none.
func printResolvConf(e env, key, missing string) error {
	data, err := os.ReadFile(e.resolvConf)
	if err != nil {
		fmt.Fprintf(e.stderr, "panic: %v\n", err)
		return exitError{2}
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, key) {
			fmt.Fprintln(e.stdout, strings.Join(strings.Split(line, " ")[1:], ","))
			return nil
		}
	}
	fmt.Fprintf(e.stderr, "panic: %s\n", missing)
	return exitError{2}
}

func etcHostsCommand(e env) *cobra.Command {
	return &cobra.Command{
		Use:   "etc-hosts",
		Short: "Prints the host's /etc/hosts file",
		Args:  cobra.MaximumNArgs(0),
		RunE: func(*cobra.Command, []string) error {
			data, err := os.ReadFile(e.hostsFile)
			if err != nil {
				fmt.Fprintf(e.stderr, "panic: %v\n", err)
				return exitError{2}
			}
			fmt.Fprintln(e.stdout, string(data))
			return nil
		},
	}
}

func connectCommand(e env) *cobra.Command {
	var timeout time.Duration
	var protocol, udpData string
	cmd := &cobra.Command{
		Use:   "connect [host:port]",
		Short: "Attempts a TCP or UDP connection and returns useful errors",
		Long: `Tries to open a TCP or UDP connection to the given host and port. On error it prints an error message prefixed with a specific fixed string that test cases can check for:

* UNKNOWN - Generic/unknown (non-network) error (eg, bad arguments)
* TIMEOUT - The connection attempt timed out
* DNS - An error in DNS resolution
* REFUSED - Connection refused
* OTHER - Other networking error (eg, "no route to host")`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			dest := args[0]
			switch protocol {
			case "", "tcp":
				return connectTCP(e, dest, timeout)
			case "udp":
				return connectUDP(e, dest, timeout, udpData)
			default:
				fmt.Fprintf(e.stderr, "Unsupported protocol %s\n", protocol)
				return exitError{1}
			}
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "Maximum time before returning an error")
	cmd.Flags().StringVar(&protocol, "protocol", "tcp", "The protocol to use to perform the connection, can be tcp or udp")
	cmd.Flags().StringVar(&udpData, "udp-data", "hostname", "The UDP payload send to the server")
	cmd.Flags().String("sctp-data", "hostname", "The SCTP payload send to the server (SCTP is not supported)")
	return cmd
}

func connectFail(e env, format string, args ...any) error {
	fmt.Fprintf(e.stderr, format, args...)
	return exitError{1}
}

func connectTCP(e env, dest string, timeout time.Duration) error {
	if _, _, err := net.SplitHostPort(dest); err != nil {
		return connectFail(e, "UNKNOWN: %v\n", err)
	}
	if _, err := net.ResolveTCPAddr("tcp", dest); err != nil {
		return connectFail(e, "DNS: %v\n", err)
	}
	conn, err := net.DialTimeout("tcp", dest, timeout)
	if err == nil {
		conn.Close()
		return nil
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Timeout() {
		return connectFail(e, "TIMEOUT\n")
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return connectFail(e, "REFUSED\n")
	}
	return connectFail(e, "OTHER: %v\n", err)
}

func connectUDP(e env, dest string, timeout time.Duration, data string) error {
	if _, err := net.ResolveUDPAddr("udp", dest); err != nil {
		return connectFail(e, "DNS: %v\n", err)
	}
	conn, err := net.Dial("udp", dest)
	if err != nil {
		return connectFail(e, "OTHER: %v\n", err)
	}
	defer conn.Close()
	if timeout > 0 {
		if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
			return connectFail(e, "OTHER: %v\n", err)
		}
	}
	if _, err := conn.Write([]byte(data + "\n")); err != nil {
		return udpFail(e, err)
	}
	buf := make([]byte, 1024)
	n, err := conn.Read(buf)
	if err != nil {
		return udpFail(e, err)
	}
	if n == 0 {
		return connectFail(e, "OTHER: No data received from the server. Cannot guarantee the server received the request.\n")
	}
	return nil
}

func udpFail(e env, err error) error {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return connectFail(e, "TIMEOUT: %v\n", err)
	case strings.Contains(err.Error(), "connection refused"):
		return connectFail(e, "REFUSED: %v\n", err)
	}
	return connectFail(e, "UNKNOWN: %v\n", err)
}

package render

import (
	"bytes"
	"context"
	"flag"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/golden")

// runCommand renders as "svclab proxier render ARGS" does.
func runCommand(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return runWithInput(t, nil, args...)
}

func runWithInput(t *testing.T, stdin io.Reader, args ...string) (string, error) {
	t.Helper()
	var opts Options
	var file string
	fs := pflag.NewFlagSet("render", pflag.ContinueOnError)
	opts.AddFlags(fs)
	fs.StringVarP(&file, "file", "f", "", "")
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	var out bytes.Buffer
	err := RenderFile(context.Background(), slog.New(slog.DiscardHandler), opts, file, stdin, &out)
	return out.String(), err
}

func TestRenderCommandGolden(t *testing.T) {
	tests := []struct {
		golden string
		args   []string
	}{
		{"demo.nft", []string{"--mode", "nftables", "--node", "test-node", "--node-ip", "192.168.0.2", "--cluster-cidr", "10.0.0.0/8", "--service-cidr", "172.30.0.0/16", "-f", "testdata/demo.yaml"}},
		{"demo.nft-transaction", []string{"--mode", "nftables", "--output", "transaction", "--node", "test-node", "--node-ip", "192.168.0.2", "--cluster-cidr", "10.0.0.0/8", "--service-cidr", "172.30.0.0/16", "-f", "testdata/demo.yaml"}},
		{"demo.iptables", []string{"--mode", "iptables", "--node", "test-node", "--node-ip", "192.168.0.2", "--cluster-cidr", "10.0.0.0/8", "-f", "testdata/demo.yaml"}},
		{"features.nft", []string{"--node", "node-a", "--cluster-cidr", "10.1.0.0/16", "--service-cidr", "172.30.0.0/16,fd00::/108", "-f", "testdata/features.yaml"}},
		{"features-all-masq.nft", []string{"--node", "node-a", "--cluster-cidr", "10.1.0.0/16", "--nodeport-addresses", "all", "--masquerade-all", "-f", "testdata/features.yaml"}},
		{"features.iptables", []string{"--mode", "iptables", "--node", "node-a", "--cluster-cidr", "10.1.0.0/16", "--nodeport-addresses", "192.168.0.0/24", "-f", "testdata/features.yaml"}},
	}
	for _, tc := range tests {
		t.Run(tc.golden, func(t *testing.T) {
			got, err := runCommand(t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "golden", tc.golden)
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("%s mismatch (-want +got; rerun with -update to accept):\n%s", path, diff)
			}
		})
	}
}

func TestRenderCommandErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"unknown mode", []string{"--mode", "ipvs", "--node", "n", "--node-ip", "192.168.0.2", "-f", "testdata/demo.yaml"}, []string{`unknown mode "ipvs": want nftables or iptables`}},
		{"missing file flag", []string{"--node", "n", "--node-ip", "192.168.0.2"}, []string{"-f FILE"}},
		{"missing node", []string{"-f", "testdata/demo.yaml"}, []string{"--node"}},
		{"no node ip", []string{"--node", "unknown", "-f", "testdata/demo.yaml"}, []string{"--node-ip"}},
		{"bad node ip", []string{"--node", "n", "--node-ip", "300.1.1.1", "-f", "testdata/demo.yaml"}, []string{`--node-ip "300.1.1.1"`}},
		{"bad nodeport address", []string{"--node", "n", "--node-ip", "192.168.0.2", "--nodeport-addresses", "eth0", "-f", "testdata/demo.yaml"}, []string{"--nodeport-addresses", `"eth0"`}},
		{"transaction in iptables mode", []string{"--mode", "iptables", "--output", "transaction", "--node", "n", "--node-ip", "192.168.0.2", "-f", "testdata/demo.yaml"}, []string{"only available in nftables mode"}},
		{"missing file", []string{"--node", "n", "--node-ip", "192.168.0.2", "-f", "testdata/nope.yaml"}, []string{"open manifest", "nope.yaml"}},
		{"unknown field", []string{"--node", "n", "--node-ip", "192.168.0.2", "-f", "testdata/bad-field.yaml"}, []string{"testdata/bad-field.yaml:8: document 2", `unknown field "spec.ports[0].protocl"`}},
		{"bad address and kind", []string{"--node", "n", "--node-ip", "192.168.0.2", "-f", "testdata/bad-ip.yaml"}, []string{
			"testdata/bad-ip.yaml:1: document 1 (EndpointSlice demo/web-1): endpoints[0].addresses[0]: \"10.180.0.300\" is not an IP address",
			`testdata/bad-ip.yaml:8: document 2: kind: unsupported apiVersion/kind "v1/ConfigMap"`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runCommand(t, tc.args...)
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestRenderFromStdin(t *testing.T) {
	demo, err := os.ReadFile("testdata/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, err := runWithInput(t, bytes.NewReader(demo), "--node", "test-node", "--node-ip", "192.168.0.2", "--cluster-cidr", "10.0.0.0/8", "--service-cidr", "172.30.0.0/16", "-f", "-")
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/golden/demo.nft")
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Error("stdin output differs from file output")
	}
}

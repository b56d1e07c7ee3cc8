//go:build linux

package nodeagent

import (
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The node's /var/log as the kubelet serves it, and nothing outside it,
// whatever links the lab planted.
func TestNodeLogs(t *testing.T) {
	host := t.TempDir()
	secret := filepath.Join(host, "secret")
	os.WriteFile(secret, []byte("host secret"), 0o600)
	rootfs := filepath.Join(host, "rootfs")
	logs := filepath.Join(rootfs, "var", "log")
	os.MkdirAll(filepath.Join(logs, "apt"), 0o755)
	os.WriteFile(filepath.Join(logs, "dpkg.log"), []byte("installed\n"), 0o644)
	os.WriteFile(filepath.Join(logs, "apt", "history.log"), []byte("history\n"), 0o644)
	os.WriteFile(filepath.Join(rootfs, "etc-shadow"), []byte("node file outside /var/log"), 0o644)
	os.WriteFile(filepath.Join(logs, "<b>odd name</b>"), nil, 0o644)
	// What the lab plants: links out of /var/log and out of the node, a
	// FIFO that would block a reader.
	os.Symlink(secret, filepath.Join(logs, "abs-link"))
	os.Symlink("../../../secret", filepath.Join(logs, "rel-link"))
	os.Symlink("/etc-shadow", filepath.Join(logs, "node-link"))
	if err := syscall.Mkfifo(filepath.Join(logs, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(nodeLogs(rootfs))
	defer srv.Close()
	get := func(p string) (int, string) {
		resp, err := srv.Client().Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		path     string
		code     int
		has, not string
	}{
		{"/logs/", 200, `<a href="dpkg.log">dpkg.log</a>`, "secret"},
		{"/logs/", 200, `<a href="apt/">apt/</a>`, "<b>"},
		{"/logs/dpkg.log", 200, "installed", ""},
		{"/logs/apt/history.log", 200, "history", ""},
		{"/logs/apt", 200, `<a href="history.log">`, ""}, // redirected to apt/
		{"/logs/nope", 404, "", ""},
		{"/logs/../../secret", 404, "", "host secret"},
		{"/logs/abs-link", 404, "", "host secret"},
		{"/logs/rel-link", 404, "", "host secret"},
		{"/logs/node-link", 404, "", "outside /var/log"},
		{"/logs/fifo", 403, "", ""},
	} {
		code, body := get(tc.path)
		if code != tc.code || !strings.Contains(body, tc.has) || (tc.not != "" && strings.Contains(body, tc.not)) {
			t.Errorf("%s: %d %q, want %d with %q and not %q", tc.path, code, body, tc.code, tc.has, tc.not)
		}
	}
	// A directory the lab filled is listed in part.
	many := filepath.Join(logs, "many")
	os.Mkdir(many, 0o755)
	for i := range maxLogListing + 5 {
		os.WriteFile(filepath.Join(many, strconv.Itoa(i)), nil, 0o644)
	}
	if code, body := get("/logs/many/"); code != 200 || strings.Count(body, "<a href=") != maxLogListing || !strings.Contains(body, "only the first") {
		t.Errorf("a full directory: %d, %d entries", code, strings.Count(body, "<a href="))
	}
	// /var/log itself a link the lab made to the host's directory.
	os.RemoveAll(logs)
	os.Symlink(host, logs)
	if code, body := get("/logs/secret"); code == 200 || strings.Contains(body, "host secret") {
		t.Errorf("through a /var/log link: %d %q", code, body)
	}
}

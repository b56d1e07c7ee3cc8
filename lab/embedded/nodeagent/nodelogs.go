//go:build linux

package nodeagent

import (
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// nodeLogs serves the node's /var/log under /logs/, as the kubelet's file
// server does: the API server's node proxy reaches it as
// /api/v1/nodes/NODE/proxy/logs/ (kubectl get --raw). A directory lists
// its entries, a regular file is sent; nothing else is. The node's files
// are the lab's: every path is resolved inside the node's /var/log
// (openat2 RESOLVE_IN_ROOT, no magic links), /var/log itself inside the
// node's root filesystem, so that no link the lab plants leads the agent,
// host root, out of them; a FIFO or a device is not opened for reading.
func nodeLogs(rootfs string) http.Handler {
	return http.StripPrefix("/logs", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		rel := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
		if err := serveNodeLog(w, r, rootfs, rel); err != nil {
			code := http.StatusInternalServerError
			switch {
			case errors.Is(err, os.ErrNotExist), errors.Is(err, unix.ENOTDIR):
				code = http.StatusNotFound
			case errors.Is(err, errNotServed), errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
				code = http.StatusForbidden
			}
			http.Error(w, fmt.Sprintf("/var/log/%s: %v", rel, err), code)
		}
	}))
}

var errNotServed = errors.New("neither a directory nor a regular file")

// maxLogListing bounds a directory listing of /logs/.
const maxLogListing = 10000

func serveNodeLog(w http.ResponseWriter, r *http.Request, rootfs, rel string) error {
	root, err := openDir(rootfs)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	logs, err := unix.Openat2(root, "var/log", &unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: inRoot})
	if err != nil {
		return &os.PathError{Op: "open", Path: "/var/log", Err: err}
	}
	defer unix.Close(logs)
	p, err := openIn(logs, rel, inRoot)
	if err != nil {
		return err
	}
	var st unix.Stat_t
	err = unix.Fstat(p, &st)
	unix.Close(p)
	if err != nil {
		return err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		f, err := openReadIn(logs, rel, inRoot)
		if err != nil {
			return err
		}
		defer f.Close()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if r.Method == http.MethodHead {
			return nil
		}
		io.Copy(w, f)
		return nil
	case unix.S_IFDIR:
		if rel != "." && !strings.HasSuffix(r.URL.Path, "/") {
			// Relative, so that it holds behind the API server's proxy.
			w.Header().Set("Location", url.PathEscape(path.Base(rel))+"/")
			w.WriteHeader(http.StatusMovedPermanently)
			return nil
		}
		fd, err := unix.Openat2(logs, cleanRel(rel), &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: inRoot})
		if err != nil {
			return &os.PathError{Op: "open", Path: rel, Err: err}
		}
		d := os.NewFile(uintptr(fd), rel)
		defer d.Close()
		// A lab can fill a directory with names: the agent lists a
		// bounded number of them.
		entries, err := d.ReadDir(maxLogListing + 1)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		more := len(entries) > maxLogListing
		entries = entries[:min(len(entries), maxLogListing)]
		names := make([]string, 0, len(entries))
		for _, e := range entries {
			n := e.Name()
			if e.IsDir() {
				n += "/"
			}
			names = append(names, n)
		}
		slices.Sort(names)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		var b strings.Builder
		b.WriteString("<pre>\n")
		for _, n := range names {
			fmt.Fprintf(&b, "<a href=\"%s\">%s</a>\n", html.EscapeString((&url.URL{Path: n}).String()), html.EscapeString(n))
		}
		if more {
			fmt.Fprintf(&b, "… (only the first %d entries are listed)\n", maxLogListing)
		}
		b.WriteString("</pre>\n")
		io.WriteString(w, b.String())
		return nil
	}
	return errNotServed
}

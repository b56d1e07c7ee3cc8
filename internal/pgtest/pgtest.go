// Package pgtest starts throwaway PostgreSQL servers for tests: the real
// server from Debian's postgresql package, run as the postgres system user
// on a data directory of its own, listening on 127.0.0.1 at a free port
// (and on a unix socket in its directory), stopped — and its directory
// removed — when the test (or, for the Shared server, the test binary)
// ends.
//
// Tests skip, saying why, when not run as root (the server refuses to run
// as root, so it is started as the postgres user, which needs root), when
// the server's binaries (/usr/lib/postgresql/*/bin) or the postgres user
// are missing (go tool task setup installs the postgresql package).
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the database/sql driver "pgx"
)

// Server is a running throwaway PostgreSQL server.
type Server struct {
	dir      string // 0755, holds data/ (the postgres user's), the socket and the log
	bin      string
	port     int
	password string
	uid, gid uint32

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	dbs  int
}

// BinDir is the directory of the newest installed PostgreSQL server's
// binaries, or why there is none usable here.
func BinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	var ok []string
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			ok = append(ok, d)
		}
	}
	if len(ok) == 0 {
		return "", errors.New("no PostgreSQL server in /usr/lib/postgresql/*/bin (install the postgresql package: go tool task setup)")
	}
	version := func(d string) int { v, _ := strconv.Atoi(filepath.Base(filepath.Dir(d))); return v }
	slices.SortFunc(ok, func(a, b string) int { return version(a) - version(b) })
	return ok[len(ok)-1], nil
}

// usable says why no server can be started here, or "".
func usable() (bin string, u *user.User, why string) {
	if os.Geteuid() != 0 {
		return "", nil, "the PostgreSQL tests need root (they run a throwaway server as the postgres user)"
	}
	bin, err := BinDir()
	if err != nil {
		return "", nil, err.Error()
	}
	u, err = user.Lookup("postgres")
	if err != nil {
		return "", nil, "no postgres system user (install the postgresql package: go tool task setup)"
	}
	return bin, u, ""
}

// Start starts a server of tb's own, stopped when tb ends. It skips tb
// when no server can run here.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, u, why := usable()
	if why != "" {
		tb.Skip(why)
	}
	s, err := start(bin, u)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Error(err)
		}
	})
	return s
}

var shared struct {
	sync.Mutex
	main bool
	s    *Server
	err  error
}

// Main runs the tests of m and then stops the Shared server. Packages
// that use Shared call it from TestMain: os.Exit(pgtest.Main(m)).
func Main(m *testing.M) int {
	shared.Lock()
	shared.main = true
	shared.Unlock()
	code := m.Run()
	shared.Lock()
	defer shared.Unlock()
	if shared.s != nil {
		if err := shared.s.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
			code = 1
		}
		shared.s = nil
	}
	return code
}

// Shared is one server for the whole test binary, started by the first
// test that needs it and stopped by Main. Tests take a database of their
// own with NewDatabase. It skips tb when no server can run here.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	shared.Lock()
	defer shared.Unlock()
	if !shared.main {
		tb.Fatal("pgtest.Shared needs TestMain to call pgtest.Main, which stops the server")
	}
	bin, u, why := usable()
	if why != "" {
		tb.Skip(why)
	}
	if shared.s == nil && shared.err == nil {
		shared.s, shared.err = start(bin, u)
	}
	if shared.err != nil {
		tb.Fatal(shared.err)
	}
	return shared.s
}

func start(bin string, u *user.User) (*Server, error) {
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp("", "svclab-pg-")
	if err != nil {
		return nil, err
	}
	pw := make([]byte, 12)
	rand.Read(pw)
	s := &Server{dir: dir, bin: bin, password: hex.EncodeToString(pw), uid: uint32(uid), gid: uint32(gid)}
	fail := func(err error) (*Server, error) {
		s.Close()
		return nil, err
	}
	// The postgres user reaches the directory; the data directory (0700,
	// as the server insists) and the socket directory are its own.
	if err := os.Chmod(dir, 0o755); err != nil {
		return fail(err)
	}
	pwfile := filepath.Join(dir, "pwfile")
	for _, f := range []struct {
		path string
		mk   func(string) error
	}{
		{s.data(), func(p string) error { return os.Mkdir(p, 0o700) }},
		{s.sockets(), func(p string) error { return os.Mkdir(p, 0o755) }},
		{pwfile, func(p string) error { return os.WriteFile(p, []byte(s.password+"\n"), 0o600) }},
		{filepath.Join(dir, "server.log"), func(p string) error { return os.WriteFile(p, nil, 0o600) }},
	} {
		if err := f.mk(f.path); err != nil {
			return fail(err)
		}
		if err := os.Chown(f.path, uid, gid); err != nil {
			return fail(err)
		}
	}
	initdb := s.command(filepath.Join(bin, "initdb"), "-D", s.data(), "-U", "postgres", "--pwfile", pwfile,
		"--auth-local", "trust", "--auth-host", "scram-sha-256", "-E", "UTF8", "--locale", "C", "--no-sync")
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %w\n%s", err, out))
	}
	os.Remove(pwfile)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	s.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	if err := s.Start(); err != nil {
		return fail(err)
	}
	return s, nil
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

func (s *Server) sockets() string { return filepath.Join(s.dir, "run") }

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = s.dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C", "HOME=" + s.dir}
	cmd.SysProcAttr = serverProcAttr(s.uid, s.gid)
	return cmd
}

// Start starts the server (again, after Stop) on its port and waits until
// it accepts connections.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("pgtest: the server runs already")
	}
	logf, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := s.command(filepath.Join(s.bin, "postgres"), "-D", s.data(), "-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+s.sockets(),
		"-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=200")
	cmd.Stdout, cmd.Stderr = logf, logf
	started := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		// Pdeathsig follows the thread that started the server, so that
		// thread stays until the server has exited.
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		cmd.Wait()
		close(done)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("starting postgres: %w", err)
	}
	s.cmd, s.done = cmd, done
	// Ready once it answers.
	db, err := sql.Open("pgx", s.url("postgres"))
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = db.PingContext(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-done:
			s.cmd = nil
			return fmt.Errorf("postgres exited at start:\n%s", s.log())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within a minute (%v):\n%s", err, s.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *Server) log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
	return string(b)
}

// Stop stops the server (a fast shutdown: connections are cut, nothing
// committed is lost); Start starts it again.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Signal(syscall.SIGQUIT)
		<-s.done
	}
	s.cmd = nil
	return nil
}

// Close stops the server and removes its directory.
func (s *Server) Close() error {
	err := s.Stop()
	if rerr := os.RemoveAll(s.dir); err == nil {
		err = rerr
	}
	return err
}

func (s *Server) url(db string) string {
	// A loaded machine (CI runs packages side by side) can take seconds
	// for a password handshake: more than the 5 s svclab allows by default.
	return fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/%s?sslmode=disable&connect_timeout=30", s.password, s.port, db)
}

// NewDatabase creates a database of tb's own and returns its URL
// (postgres://postgres:PASSWORD@127.0.0.1:PORT/NAME?sslmode=disable).
func (s *Server) NewDatabase(tb testing.TB) string {
	tb.Helper()
	s.mu.Lock()
	s.dbs++
	name := fmt.Sprintf("t%d_%s", s.dbs, strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return '_'
	}, tb.Name()))
	s.mu.Unlock()
	if len(name) > 63 {
		name = name[:63]
	}
	db, err := sql.Open("pgx", s.url("postgres"))
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE DATABASE "` + name + `"`); err != nil {
		tb.Fatalf("creating database %s: %v", name, err)
	}
	return s.url(name)
}

// Port is the TCP port the server listens on at 127.0.0.1.
func (s *Server) Port() int { return s.port }

// Backend is a database tests run on.
type Backend struct {
	Name string
	// Location returns the location of a new, empty database: a SQLite
	// file's path or a PostgreSQL URL.
	Location func(tb testing.TB) string
}

// SQLite is the backend of SQLite files named file in the test's
// temporary directory.
func SQLite(file string) Backend {
	return Backend{"sqlite", func(tb testing.TB) string { return filepath.Join(tb.TempDir(), file) }}
}

// Postgres is the backend of databases on the Shared server.
var Postgres = Backend{"postgres", func(tb testing.TB) string {
	tb.Helper()
	return Shared(tb).NewDatabase(tb)
}}

// ForEachBackend runs test as the subtests "sqlite" (files named file)
// and "postgres" (skipped, saying why, where no server can run).
func ForEachBackend(t *testing.T, file string, test func(*testing.T, Backend)) {
	for _, b := range []Backend{SQLite(file), Postgres} {
		t.Run(b.Name, func(t *testing.T) { test(t, b) })
	}
}

// ForEachBackendB is ForEachBackend for benchmarks.
func ForEachBackendB(b *testing.B, file string, bench func(*testing.B, Backend)) {
	for _, be := range []Backend{SQLite(file), Postgres} {
		b.Run(be.Name, func(b *testing.B) { bench(b, be) })
	}
}

package dockerd

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// fakeSystem is the one hand-written System of the tests: daemons are
// addresses that answer, Start makes the own socket answer (and writes the
// pid file as dockerd does), Signal stops it.
type fakeSystem struct {
	mu         sync.Mutex
	answering  map[string]bool
	containers map[string][]string
	installed  bool
	root       bool
	bounding   uint64
	lastCap    int
	nextPid    int
	alive      map[int]string // pid → host it serves
	started    [][]string
	installs   int
	signals    []syscall.Signal
	startFails bool
}

func newFake() *fakeSystem {
	return &fakeSystem{answering: map[string]bool{}, containers: map[string][]string{}, installed: true, root: true,
		bounding: 1<<41 - 1, lastCap: 40, nextPid: 100, alive: map[int]string{}}
}

var _ System = (*fakeSystem)(nil)

func (f *fakeSystem) Ping(_ context.Context, host string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.answering[host] {
		return "20.10.24", nil
	}
	return "", errors.New("Cannot connect to the Docker daemon at " + host)
}

func (f *fakeSystem) Containers(_ context.Context, host string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.containers[host], nil
}

func (f *fakeSystem) Install(context.Context, io.Writer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.installs++
	f.installed = true
	return nil
}

func (f *fakeSystem) IsRoot() bool { return f.root }

func (f *fakeSystem) Start(argv []string, logPath string) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.started = append(f.started, argv)
	if f.startFails {
		return 0, errors.New("exec format error")
	}
	f.nextPid++
	pid := f.nextPid
	// dockerd --config-file DIR/daemon.json writes DIR/dockerd.pid and
	// listens on DIR/docker.sock.
	dir := filepath.Dir(argv[len(argv)-1])
	host := "unix://" + filepath.Join(dir, "docker.sock")
	f.alive[pid] = host
	f.answering[host] = true
	return pid, os.WriteFile(filepath.Join(dir, "dockerd.pid"), []byte(strconv.Itoa(pid)), 0o600)
}

func (f *fakeSystem) Alive(pid int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.alive[pid]
	return ok
}

func (f *fakeSystem) Signal(pid int, sig syscall.Signal) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.signals = append(f.signals, sig)
	host, ok := f.alive[pid]
	if !ok {
		return syscall.ESRCH
	}
	delete(f.alive, pid)
	delete(f.answering, host)
	return nil
}

func (f *fakeSystem) Capabilities() (uint64, int, error) { return f.bounding, f.lastCap, nil }
func (f *fakeSystem) Unmount(string) error               { return nil }

func (f *fakeSystem) LookPath(name string) (string, error) {
	if (name == "dockerd" || name == "docker") && !f.installed {
		return "", errors.New("not found")
	}
	return "/usr/sbin/" + name, nil
}

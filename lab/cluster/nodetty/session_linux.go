//go:build linux

package nodetty

import (
	"bytes"
	"errors"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// waitExited waits for process pid, a child of this process, to end
// without reaping it: its ID stays taken, and so does the ID of the
// session it leads, until cmd.Wait.
func waitExited(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// hangUpSession sends SIGHUP and SIGCONT (a stopped job sees the SIGHUP)
// to every process of session sid, as the kernel does to a terminal's
// session leader when the terminal hangs up — to all of them, because the
// leader is svclab's process on the host (the shell's parent is not in
// the node). A process joins no session but by being forked into it, so
// every one found descends from the command.
func hangUpSession(sid int) {
	for _, pid := range sessionMembers(sid) {
		unix.Kill(pid, unix.SIGHUP)
		unix.Kill(pid, unix.SIGCONT)
	}
}

// sessionMembers lists the processes of session sid (in this process's
// PID namespace, where sid was made).
func sessionMembers(sid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if s, ok := sessionOf(pid); ok && s == sid {
			out = append(out, pid)
		}
	}
	return out
}

// sessionOf reads the session of process pid from /proc/PID/stat (the
// sixth field; the command's name, the second, may hold spaces and
// parentheses, so the fields are counted after its last ')').
func sessionOf(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 4 {
		return 0, false
	}
	s, err := strconv.Atoi(string(f[3]))
	return s, err == nil
}

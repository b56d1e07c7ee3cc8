package pgtest

import "syscall"

// serverProcAttr runs the server as uid:gid in its own process group; a
// test binary that dies (a timeout, kill -9) takes the server with it:
// nothing is left running.
func serverProcAttr(uid, gid uint32) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: uid, Gid: gid},
		Setpgid:    true,
		Pdeathsig:  syscall.SIGQUIT,
	}
}

//go:build !linux

package pgtest

import "syscall"

// serverProcAttr runs the server as uid:gid in its own process group
// (there is no parent-death signal off Linux: the tests that start a
// server need Linux and root anyway; this keeps the package building).
func serverProcAttr(uid, gid uint32) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: uid, Gid: gid},
		Setpgid:    true,
	}
}

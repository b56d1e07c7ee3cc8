package flock

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// ErrLocked is returned by TryLock when another open file holds the lock.
var ErrLocked = errors.New("locked by another process")

// Lock takes an exclusive lock on path (created with perm when missing),
// waiting for it; unlock releases it.
func Lock(path string, perm os.FileMode) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, perm)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// TryLock takes an exclusive lock on path (created with perm when
// missing) without waiting: ErrLocked (wrapped) when another open file
// holds it — another process's, or this one's through another open. The
// returned file holds the lock until it is closed.
func TryLock(path string, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, perm)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return f, nil
}

// Held says whether an open file holds the lock on path. A file that does
// not exist is not held; one that cannot be opened counts as held (it is
// not svclab's to judge).
func Held(path string) bool {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err != nil {
		return true
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return true
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// Shared takes a shared lock on path, waiting while another process holds
// it exclusively. Many processes may hold it shared at once; the lock goes
// with the process (unlock, or exit).
func Shared(path string, perm os.FileMode) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, perm)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

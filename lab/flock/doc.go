// Package flock is svclab's one way of locking files between processes:
// advisory flock(2) locks, which the kernel drops when their holder dies,
// so a lock outlives no crash. Lock waits for a lock; TryLock takes one
// or says ErrLocked; Held tells whether anybody holds one.
package flock

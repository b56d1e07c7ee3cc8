// Package labs gives every learner of a class their own lab cluster.
//
// A Manager creates clusters through cluster.Provider (so the embedded and
// kind backends both work) and hands them out:
//
//   - Capacity bounds the labs that exist at once (starting or ready).
//     Learners beyond it wait in a FIFO queue and are told their position
//     as it changes.
//   - A warm pool of pre-created clusters (PoolSize, never more than the
//     free capacity) makes a start instant; it is refilled in the
//     background, and a learner who arrives while a pool cluster is still
//     being created takes that one over.
//   - Labs are reclaimed when their time limit runs out or when they have
//     been idle for the idle timeout, with warnings before (Warnings).
//     The instructor can extend a lab or reset it (a fresh cluster).
//   - Admission control refuses to create a cluster when the machine is
//     short of memory (MemAvailable from /proc/meminfo, less what clusters
//     being created will still take, against an estimate per lab plus a
//     reserve for the host), with a message for the learner.
//   - A StartLimit, shared by every class a server runs, bounds the
//     clusters created at once (one per CPU by default): creating one is
//     CPU-bound, and 30 created at once on 2 cores all miss their
//     readiness deadlines. A learner whose cluster waits its turn is told
//     how many start before it.
//   - Every cluster the manager creates is written to a Ledger before it
//     is created and forgotten once deleted. Close deletes them all; Sweep
//     (run by Start) deletes those no live lab references, which after a
//     crash of svclab is all of them.
//
// What happens is published as Events on a stream (lab/class/stream) that
// the web UI shows: queue positions, progress while a cluster starts,
// warnings before reclaim, reclaims, resets. Time comes from Config.Now and
// Tick, so tests drive expiry with a fake clock.
package labs

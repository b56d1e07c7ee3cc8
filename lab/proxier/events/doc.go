// Package events is the proxier's sync-event stream, a teaching hook: after
// every sync attempt (and every skipped sync and fault change) the daemon
// publishes an Event saying what changed (Services, endpoints), which rules
// were added or removed, whether the sync was full or partial, how long it
// took and whether it failed. In-process subscribers (the svclab server)
// call Subscribe; Handler serves the same stream as newline-delimited JSON
// (the daemon mounts it on the metrics address at /events).
package events

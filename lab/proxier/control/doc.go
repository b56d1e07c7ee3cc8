// Package control guards the bundled proxier's teaching hooks (/faults and
// /sync on the metrics port) so that only svclab can use them: a lab's
// learner has a shell on every node and can reach 127.0.0.1:10249, and a
// scenario's fault must not be one curl away from being switched off.
//
// svclab holds an Ed25519 key per cluster; the proxier is given the public
// half (--control-key). A guarded request carries a nonce the proxier
// handed out moments before (POST /control/nonce; each is good for one
// request and 30 seconds) and a signature over the nonce, the method, the
// path and query, and the body's SHA-256. A learner who reads the public
// key, or captures a request on the node's loopback, can neither forge one
// nor replay it. Without --control-key the hooks are open, as for a
// proxier run by hand.
package control

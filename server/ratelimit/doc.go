// Package ratelimit limits how often one key (a client address, a learner)
// may do something: a token bucket per key, with presets for the class join
// and check endpoints, and HTTP middlewares that answer 429 with
// Retry-After and a message written for the person who was refused —
// Middleware counts every request, FailuresMiddleware only the failed
// ones (wrong join codes and tokens).
package ratelimit

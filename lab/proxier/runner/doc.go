// Package runner is kube-proxy v1.37's bounded-frequency runner
// (pkg/proxy/runner): it calls a sync function when asked to (Run), never
// more often than minInterval, at least every maxInterval, and again after
// retryInterval when the function fails. Requests coalesce: many Run calls
// while a sync is running or waiting out minInterval cause one more sync,
// not many. There are no bursts (the pre-v1.34 async runner allowed two).
package runner

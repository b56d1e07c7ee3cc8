package nodeagent

// The one part of the agent built on every system: the lab's limit flags
// (package embedded) name a container's log limits everywhere.

// LogLimits bound a container's log (the kubelet's containerLogMaxSize
// and containerLogMaxFiles; 10 MiB and 5 by default).
type LogLimits struct {
	MaxBytes int64 `json:"maxBytes"`
	MaxFiles int   `json:"maxFiles"`
}

// DefaultLogLimits are the kubelet's defaults.
var DefaultLogLimits = LogLimits{MaxBytes: 10 << 20, MaxFiles: 5}

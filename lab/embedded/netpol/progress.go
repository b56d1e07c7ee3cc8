package netpol

import "sync"

// Synced is how far an agent's table is: the resource versions of the
// Pods, Namespaces and NetworkPolicies its informers held when it compiled
// the table now in the kernel. Every change to those objects up to these
// versions is enforced.
type Synced struct {
	Pods       string `json:"pods"`
	Namespaces string `json:"namespaces"`
	Policies   string `json:"policies"`
}

// Progress holds a running agent's Synced for whoever asks (the node
// agents' health socket): a grader that makes a Pod of its own waits until
// every node's agent has enforced that Pod's version before it judges
// traffic from or to it. The zero value is ready; nothing is synced yet.
type Progress struct {
	mu sync.Mutex
	s  Synced
}

// Get returns the last Synced recorded.
func (p *Progress) Get() Synced {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.s
}

func (p *Progress) set(s Synced) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.s = s
}

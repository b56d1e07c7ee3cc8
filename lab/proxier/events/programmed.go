package events

// ProgrammedPath is where the proxier says, on its metrics address, how far
// its rules follow the API (GET, JSON: Programmed).
const ProgrammedPath = "/programmed"

// Programmed is the answer at ProgrammedPath: every Service and
// EndpointSlice change up to ResourceVersion (a decimal number, as the API
// writes them) is in the node's rules; Held names the fault that holds
// syncs back ("stop-syncing", "sync-every"; "min-sync-period" when its
// configured minimum interval between syncs is long), when one does.
type Programmed struct {
	ResourceVersion string `json:"resourceVersion"`
	Held            string `json:"held,omitempty"`
}

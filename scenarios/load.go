package scenarios

import (
	"github.com/svclab/svclab/lab/faults"
	"github.com/svclab/svclab/lab/scenario"
)

// Source is the scenarios compiled into svclab (FS), as messages show
// them.
func Source() scenario.Source {
	return scenario.Source{FS: FS, Display: "scenarios (built in)"}
}

// Load loads the scenarios compiled into svclab, checking their faults
// against svclab's own (faults.Registry) unless opts names other faults.
func Load(opts scenario.Options) (*scenario.Catalog, scenario.Problems) {
	if opts.Faults == nil {
		opts.Faults = faults.Registry()
	}
	return scenario.Load(opts, Source())
}

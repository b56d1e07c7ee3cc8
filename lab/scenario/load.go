package scenario

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Source is a tree of scenarios: a directory of scenario directories (like
// scenarios/), or a single scenario directory.
type Source struct {
	FS fs.FS
	// Display is how the root is shown in messages ("scenarios").
	Display string
}

// DirSource is the directory dir on disk.
func DirSource(dir string) Source {
	return Source{FS: os.DirFS(dir), Display: filepath.ToSlash(filepath.Clean(dir))}
}

// Options configure loading.
type Options struct {
	// Faults are the fault kinds scenarios may name (nil: DefaultFaults).
	Faults *Registry
	// Logger receives debug logs (nil: none).
	Logger *slog.Logger
}

// Catalog holds loaded scenarios, sorted by id.
type Catalog struct {
	Scenarios []*Scenario
}

// Get returns the scenario with id, or nil.
func (c *Catalog) Get(id string) *Scenario {
	for _, s := range c.Scenarios {
		if s.ID == id {
			return s
		}
	}
	return nil
}

// IDs lists the catalog's scenario ids.
func (c *Catalog) IDs() []string {
	ids := make([]string, len(c.Scenarios))
	for i, s := range c.Scenarios {
		ids[i] = s.ID
	}
	return ids
}

// Load reads and validates every scenario of the sources. The catalog holds
// the scenarios without problems; the problems of all the others, every one
// of them, are returned sorted by file and line.
func Load(opts Options, sources ...Source) (*Catalog, Problems) {
	if opts.Faults == nil {
		opts.Faults = DefaultFaults()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	var problems Problems
	cat := &Catalog{}
	type idUse struct {
		file string
		line int
	}
	ids := map[string]idUse{}
	for _, src := range sources {
		dirs, ps := scenarioDirs(src)
		problems = append(problems, ps...)
		for _, dir := range dirs {
			s, lines, ps := loadScenario(src, dir, opts)
			problems = append(problems, ps...)
			if s == nil {
				continue
			}
			if first, dup := ids[s.ID]; dup && s.ID != "" {
				problems = append(problems, Problem{File: s.File(), Line: lines["id"], Field: "id",
					Message: fmt.Sprintf("%q is also the id of %s:%d; scenario ids must be unique", s.ID, first.file, first.line)})
				continue
			}
			ids[s.ID] = idUse{s.File(), lines["id"]}
			if len(ps) == 0 {
				cat.Scenarios = append(cat.Scenarios, s)
			}
			opts.Logger.Debug("loaded scenario", "id", s.ID, "dir", s.Dir, "problems", len(ps))
		}
	}
	slices.SortFunc(cat.Scenarios, func(a, b *Scenario) int { return strings.Compare(a.ID, b.ID) })
	problems.sort()
	return cat, problems
}

// scenarioDirs lists the scenario directories of a source: "." when the
// source is one scenario, else its subdirectories (except testdata and
// those starting with "." or "_").
func scenarioDirs(src Source) ([]string, Problems) {
	if _, err := fs.Stat(src.FS, FileName); err == nil {
		return []string{"."}, nil
	}
	entries, err := fs.ReadDir(src.FS, ".")
	if err != nil {
		msg := err.Error()
		if errors.Is(err, fs.ErrNotExist) {
			msg = "no such directory"
		}
		return nil, Problems{{File: src.Display, Message: msg}}
	}
	var dirs []string
	var problems Problems
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			continue
		}
		if _, err := fs.Stat(src.FS, path.Join(name, FileName)); err != nil {
			problems = append(problems, Problem{File: joinDisplay(src.Display, name),
				Message: "no " + FileName + ": every directory here is a scenario (start names of other directories with _)"})
			continue
		}
		dirs = append(dirs, name)
	}
	if len(dirs) == 0 && len(problems) == 0 {
		problems = append(problems, Problem{File: src.Display, Message: "no scenarios: expected " + FileName + " or directories holding one"})
	}
	return dirs, problems
}

// loadScenario decodes and validates the scenario in dir of src. It
// returns nil when the file cannot be read or parsed at all.
func loadScenario(src Source, dir string, opts Options) (*Scenario, map[string]int, Problems) {
	display := joinDisplay(src.Display, dir)
	file := joinDisplay(display, FileName)
	data, err := fs.ReadFile(src.FS, path.Join(dir, FileName))
	if err != nil {
		return nil, nil, Problems{{File: file, Message: fmt.Sprintf("cannot read: %v", err)}}
	}
	d := newDecoder(file)
	s := &Scenario{Dir: display}
	d.decodeScenario(data, s)
	if _, parsed := d.lines[""]; !parsed {
		return nil, nil, d.problems
	}
	dirName := path.Base(display)
	if s.ID != "" && s.ID != dirName {
		d.add(d.lineOf("id"), "id", fmt.Sprintf("%q must equal the name of the scenario's directory, %q", s.ID, dirName))
	}
	v := &validator{d: d, s: s, faults: opts.Faults}
	v.validate()
	var problems Problems
	for i, name := range s.Setup.Manifests {
		p := fmt.Sprintf("setup.manifests[%d]", i)
		if !pattern("file").MatchString(name) {
			continue // reported by the field rules
		}
		if name == FileName {
			d.add(d.lineOf(p), p, FileName+" is the scenario itself, not a manifest")
			continue
		}
		mdata, err := fs.ReadFile(src.FS, path.Join(dir, name))
		if err != nil {
			msg := fmt.Sprintf("cannot read %s: %v", joinDisplay(display, name), err)
			if errors.Is(err, fs.ErrNotExist) {
				msg = fmt.Sprintf("%s does not exist", joinDisplay(display, name))
			}
			d.add(d.lineOf(p), p, msg)
			continue
		}
		m, ps := decodeManifest(mdata, name, joinDisplay(display, name))
		problems = append(problems, ps...)
		s.Manifests = append(s.Manifests, m)
	}
	if len(problems) == 0 {
		// Only complete manifests tell which objects the setup creates.
		v.faultObjects()
		v.witnessEndpoints()
	}
	problems = append(problems, d.problems...)
	return s, d.lines, problems
}

package class

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/svclab/svclab/lab/class/labs"
)

// Hub holds the classrooms svclab serves, so that the web UI can route a
// join code or a class id to its classroom.
type Hub struct {
	opts Options

	mu    sync.Mutex
	rooms map[string]*Classroom
}

// NewHub returns a Hub whose classrooms share opts (DB, Provider, Catalog,
// Attempts...).
func NewHub(opts Options) *Hub {
	if opts.Labs.Starts == nil {
		// The classes share the machine, and so its limit of clusters
		// created at once.
		opts.Labs.Starts = labs.NewStartLimit(0)
	}
	return &Hub{opts: opts, rooms: map[string]*Classroom{}}
}

// OpenAll opens every open class in the database.
func (h *Hub) OpenAll(ctx context.Context) error {
	classes, err := h.opts.DB.Classes(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range classes {
		if c.Open() {
			if _, err := h.Open(ctx, c.ID); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Open serves class ref (an id or a name), or returns it when it is
// served already.
func (h *Hub) Open(ctx context.Context, ref string) (*Classroom, error) {
	c, err := h.opts.DB.Class(ctx, ref)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if cr := h.rooms[c.ID]; cr != nil {
		return cr, nil
	}
	cr, err := OpenClassroom(ctx, c.ID, h.opts)
	if err != nil {
		return nil, err
	}
	h.rooms[c.ID] = cr
	return cr, nil
}

// Classroom returns the served class with id.
func (h *Hub) Classroom(id string) (*Classroom, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cr := h.rooms[id]
	if cr == nil {
		return nil, fmt.Errorf("no class %q is being served: %w", id, ErrNotFound)
	}
	return cr, nil
}

// Classrooms lists the served classes by name.
func (h *Hub) Classrooms() []*Classroom {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*Classroom, 0, len(h.rooms))
	for _, cr := range h.rooms {
		out = append(out, cr)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Class.Name < out[j].Class.Name })
	return out
}

// Join adds a learner to the served class whose join code is code.
func (h *Hub) Join(ctx context.Context, code, name string) (*Classroom, JoinedLearner, error) {
	var cr *Classroom
	j, _, err := h.opts.DB.join(ctx, code, name, func(c *Class) error {
		h.mu.Lock()
		cr = h.rooms[c.ID]
		h.mu.Unlock()
		if cr == nil {
			return refusal(fmt.Sprintf("class %s is not running on this server right now: ask your instructor", c.Name))
		}
		return nil
	})
	if err != nil {
		return nil, JoinedLearner{}, err
	}
	cr.Board.AddLearner(j.Learner)
	return cr, j, nil
}

// Shutdown stops serving every class (svclab is exiting) and deletes
// their clusters.
func (h *Hub) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	rooms := h.rooms
	h.rooms = map[string]*Classroom{}
	h.mu.Unlock()
	var wg sync.WaitGroup
	errs := make([]error, 0, len(rooms))
	var mu sync.Mutex
	for _, cr := range rooms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cr.Shutdown(ctx); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("class %s: %w", cr.Class.Name, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

//go:build linux

package nftables

import (
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/knftables"
)

// elementStore remembers the elements of one set or map as they are in the
// kernel, so that a sync only adds, replaces and deletes the elements that
// changed instead of flushing the container.
type elementStore struct {
	kind     string // "set" or "map"
	name     string
	elements map[string]*storedElement // joined key -> element
	// gen numbers the syncs; elements not ensured during the current
	// one (an older gen) are deleted by cleanup.
	gen uint64
}

type storedElement struct {
	value string // joined value
	gen   uint64
}

func newElementStore(kind, name string) *elementStore {
	return &elementStore{kind: kind, name: name, elements: map[string]*storedElement{}, gen: 1}
}

func joinElem(parts []string) string { return strings.Join(parts, " . ") }

func splitElem(s string) []string { return strings.Split(s, " . ") }

// reset empties the store (the container does not exist).
func (s *elementStore) reset() {
	clear(s.elements)
	s.gen++
}

// load replaces the store's content with the kernel's, elems as
// ListElements returned them with err. If listing failed (other than "not
// found"), the container is flushed in tx instead, so that the sync re-adds
// everything.
func (s *elementStore) load(tx *knftables.Transaction, elems []*knftables.Element, err error) error {
	s.reset()
	if err != nil && !knftables.IsNotFound(err) {
		if s.kind == "set" {
			tx.Flush(&knftables.Set{Name: s.name})
		} else {
			tx.Flush(&knftables.Map{Name: s.name})
		}
		return fmt.Errorf("list elements of %s %s: %w", s.kind, s.name, err)
	}
	for _, e := range elems {
		// An older generation: deleted unless ensured.
		s.elements[joinElem(e.Key)] = &storedElement{value: joinElem(e.Value), gen: s.gen - 1}
	}
	return nil
}

// ensure adds elem (whose joined key and value are key and value) to tx
// unless it is already present with the same value; an element whose value
// changed is deleted and re-added.
func (s *elementStore) ensure(tx *knftables.Transaction, elem *knftables.Element, key, value string) {
	old := s.elements[key]
	switch {
	case old == nil:
		tx.Add(elem)
		s.elements[key] = &storedElement{value: value, gen: s.gen}
		return
	case old.value != value:
		tx.Delete(elem)
		tx.Add(elem)
		old.value = value
	}
	old.gen = s.gen
}

// cleanup deletes every element that was not ensured during this sync, in
// key order, and starts the next sync.
func (s *elementStore) cleanup(tx *knftables.Transaction) {
	var stale []string
	for key, e := range s.elements {
		if e.gen != s.gen {
			stale = append(stale, key)
		}
	}
	slices.Sort(stale)
	for _, key := range stale {
		e := &knftables.Element{Key: splitElem(key)}
		if s.kind == "set" {
			e.Set = s.name
		} else {
			e.Map = s.name
		}
		tx.Delete(e)
		delete(s.elements, key)
	}
	s.gen++
}

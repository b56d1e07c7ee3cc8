package nftables

import (
	"context"
	"fmt"
	"maps"
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
	elements map[string]string // joined key -> joined value
	leftover map[string]bool   // keys not (yet) ensured during this sync
}

func newElementStore(kind, name string) *elementStore {
	return &elementStore{kind: kind, name: name, elements: map[string]string{}, leftover: map[string]bool{}}
}

func joinElem(parts []string) string { return strings.Join(parts, " . ") }

func splitElem(s string) []string { return strings.Split(s, " . ") }

// load replaces the store's content with the kernel's. If listing fails
// (other than "not found"), the container is flushed in tx instead, so that
// the sync re-adds everything.
func (s *elementStore) load(ctx context.Context, tx *knftables.Transaction, nft knftables.Interface) error {
	clear(s.elements)
	defer s.startSync()
	elems, err := nft.ListElements(ctx, s.kind, s.name)
	if err != nil && !knftables.IsNotFound(err) {
		if s.kind == "set" {
			tx.Flush(&knftables.Set{Name: s.name})
		} else {
			tx.Flush(&knftables.Map{Name: s.name})
		}
		return fmt.Errorf("list elements of %s %s: %w", s.kind, s.name, err)
	}
	for _, e := range elems {
		s.elements[joinElem(e.Key)] = joinElem(e.Value)
	}
	return nil
}

// startSync marks every known element as a candidate for deletion.
func (s *elementStore) startSync() {
	clear(s.leftover)
	for k := range s.elements {
		s.leftover[k] = true
	}
}

// ensure adds elem to tx unless it is already present with the same value;
// an element whose value changed is deleted and re-added.
func (s *elementStore) ensure(tx *knftables.Transaction, elem *knftables.Element) {
	key, value := joinElem(elem.Key), joinElem(elem.Value)
	old, exists := s.elements[key]
	switch {
	case !exists:
		tx.Add(elem)
	case old != value:
		tx.Delete(elem)
		tx.Add(elem)
	}
	s.elements[key] = value
	delete(s.leftover, key)
}

// cleanup deletes every element that was not ensured during this sync, in
// key order.
func (s *elementStore) cleanup(tx *knftables.Transaction) {
	for _, key := range slices.Sorted(maps.Keys(s.leftover)) {
		e := &knftables.Element{Key: splitElem(key)}
		if s.kind == "set" {
			e.Set = s.name
		} else {
			e.Map = s.name
		}
		tx.Delete(e)
		delete(s.elements, key)
	}
	s.startSync()
}

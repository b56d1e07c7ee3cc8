package userns

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/svclab/svclab/lab/flock"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Range is a block of host ids, mapped inside a user namespace from 0.
type Range struct {
	// Base is the host id of id 0 inside.
	Base uint32 `json:"base"`
	// Size is how many ids are mapped.
	Size uint32 `json:"size"`
}

// Valid tells whether r maps anything.
func (r Range) Valid() bool { return r.Size > 0 }

// HostID is the host id of id inside; ok is false when id is not mapped.
func (r Range) HostID(id uint32) (uint32, bool) {
	if id >= r.Size {
		return 0, false
	}
	return r.Base + id, true
}

// Sub is the n-th block of size ids within r, as host ids.
func (r Range) Sub(n, size uint32) (Range, error) {
	if size == 0 || uint64(n+1)*uint64(size) > uint64(r.Size) {
		return Range{}, fmt.Errorf("block %d of %d ids is outside a range of %d ids", n, size, r.Size)
	}
	return Range{Base: r.Base + n*size, Size: size}, nil
}

// String is the range as /proc/PID/uid_map writes it: "0 BASE SIZE".
func (r Range) String() string { return fmt.Sprintf("0 %d %d", r.Base, r.Size) }

// Layout of the machine-wide pool of lab ranges: 1,023 ranges of 2^20 ids
// from host id 2^30 — far above the ids of users (/etc/subuid's usual
// 100000-based ranges, Docker's userns-remap) — each lab mapping 16 blocks
// of 65,536: the first for the lab itself, the others for its Pods that
// ask for a user namespace of their own.
const (
	DefaultFirst = 1 << 30
	LabSize      = 1 << 20
	DefaultCount = 1023
	// PodSize is the ids a Pod with a user namespace of its own gets, as
	// the kubelet gives.
	PodSize = 1 << 16
)

// DefaultClaimsDir holds the machine-wide claims, whichever state
// directory a lab lives in.
const DefaultClaimsDir = "/run/svclab/userns"

// Allocator hands out Ranges from a machine-wide pool. A range is claimed
// by a file named after its index, created exclusively, under an flock of
// the pool, so concurrent allocations of any process never collide.
type Allocator struct {
	Dir   string
	First uint32
	Size  uint32
	Count int
}

// DefaultAllocator is the pool every lab of the machine draws from.
func DefaultAllocator() Allocator {
	return Allocator{Dir: DefaultClaimsDir, First: DefaultFirst, Size: LabSize, Count: DefaultCount}
}

// Claim records who holds a range.
type Claim struct {
	Index int   `json:"index"`
	Range Range `json:"range"`
	// Owner is the lab's state directory.
	Owner string `json:"owner"`
	// Token tells this claim from an earlier one of the same owner.
	Token   string    `json:"token"`
	Created time.Time `json:"created"`
}

// Allocate claims the first free range for owner. A claim that stale
// reports true for is taken back first (its lab is gone); stale may be nil.
func (a Allocator) Allocate(owner string, stale func(Claim) bool) (Claim, error) {
	unlock, err := a.lock()
	if err != nil {
		return Claim{}, err
	}
	defer unlock()
	tok := make([]byte, 8)
	rand.Read(tok)
	for i := 0; i < a.Count; i++ {
		path := a.path(i)
		if c, err := a.read(path); err == nil {
			if stale == nil || !stale(c) {
				continue
			}
			if err := os.Remove(path); err != nil {
				return Claim{}, fmt.Errorf("taking back the id range of a lab that is gone: %w", err)
			}
		} else if !errors.Is(err, os.ErrNotExist) {
			// A damaged claim is left alone: a person can look at it.
			continue
		}
		c := Claim{Index: i, Range: Range{Base: a.First + uint32(i)*a.Size, Size: a.Size}, Owner: owner,
			Token: hex.EncodeToString(tok), Created: time.Now().UTC()}
		b, _ := json.Marshal(c)
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return Claim{}, fmt.Errorf("claiming an id range: %w", err)
		}
		// A hard link fails if the name exists: the claim appears whole
		// or not at all.
		err := os.Link(tmp, path)
		os.Remove(tmp)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return Claim{}, fmt.Errorf("claiming an id range: %w", err)
		}
		return c, nil
	}
	return Claim{}, fmt.Errorf("all %d id ranges for labs are in use (delete labs with 'svclab cluster delete', or remove stale claims from %s)", a.Count, a.Dir)
}

// Release gives back c's range, if c still holds it.
func (a Allocator) Release(c Claim) error {
	unlock, err := a.lock()
	if err != nil {
		return err
	}
	defer unlock()
	path := a.path(c.Index)
	cur, err := a.read(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil || cur.Token != c.Token {
		return nil // someone else's now
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("releasing id range %d: %w", c.Index, err)
	}
	return nil
}

// Claims lists the ranges claimed now.
func (a Allocator) Claims() ([]Claim, error) {
	entries, err := os.ReadDir(a.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Claim
	for _, e := range entries {
		if _, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".json")); err != nil || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		if c, err := a.read(filepath.Join(a.Dir, e.Name())); err == nil {
			out = append(out, c)
		}
	}
	return out, nil
}

// ReleaseStale gives back every claim stale reports true for.
func (a Allocator) ReleaseStale(stale func(Claim) bool) error {
	claims, err := a.Claims()
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range claims {
		if stale(c) {
			errs = append(errs, a.Release(c))
		}
	}
	return errors.Join(errs...)
}

func (a Allocator) path(i int) string { return filepath.Join(a.Dir, strconv.Itoa(i)+".json") }

func (a Allocator) read(path string) (Claim, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Claim{}, err
	}
	var c Claim
	if err := json.Unmarshal(b, &c); err != nil {
		return Claim{}, fmt.Errorf("%s is damaged: %w", path, err)
	}
	return c, nil
}

func (a Allocator) lock() (func(), error) {
	if err := os.MkdirAll(a.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("the id range claims %s: %w", a.Dir, err)
	}
	return flock.Lock(filepath.Join(a.Dir, ".lock"), 0o600)
}

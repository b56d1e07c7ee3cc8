package labs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// MiB is a mebibyte.
const MiB = 1 << 20

// Defaults of admission control.
const (
	// DefaultLabMemory is what one 3-node embedded cluster takes (measured:
	// about 600 MiB).
	DefaultLabMemory = 600 * MiB
	// DefaultReserveMemory is kept free for the host and svclab itself.
	DefaultReserveMemory = 512 * MiB
)

// ProcMeminfo returns a reader of MemAvailable from a meminfo file
// (/proc/meminfo), in bytes.
func ProcMeminfo(path string) func() (uint64, error) {
	return func() (uint64, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return 0, fmt.Errorf("reading free memory: %w", err)
		}
		return parseMemAvailable(b)
	}
}

func parseMemAvailable(b []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || key != "MemAvailable" {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("meminfo: unexpected MemAvailable line %q", sc.Text())
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("meminfo: MemAvailable %q: %w", f[0], err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("meminfo: no MemAvailable line (Linux 3.14 or later has one)")
}

// MemoryError is admission control's refusal.
type MemoryError struct {
	// Available is the memory free for new labs: MemAvailable less what
	// clusters being created will still take.
	Available uint64
	// Need is one lab's estimate plus the reserve.
	Need uint64
}

func (e *MemoryError) Error() string {
	return fmt.Sprintf("The lab machine is short of memory right now (%d MiB free, a new lab needs about %d MiB), so no new lab can start. Try again in a few minutes; if it keeps happening, tell your instructor.",
		e.Available/MiB, e.Need/MiB)
}

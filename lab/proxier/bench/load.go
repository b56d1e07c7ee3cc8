package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// LoadAvg is the first three fields of /proc/loadavg.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// cpuTotals reads the aggregate line of /proc/stat: busy and total ticks.
func cpuTotals() (busy, total uint64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	for i, s := range f[1:] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %w", err)
		}
		total += v
		// idle and iowait are fields 4 and 5.
		if i != 3 && i != 4 {
			busy += v
		}
	}
	return busy, total, nil
}

// Busy is the fraction (0..1) of all CPUs busy during window.
func Busy(ctx context.Context, window time.Duration) (float64, error) {
	b0, t0, err := cpuTotals()
	if err != nil {
		return 0, err
	}
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(window):
	}
	b1, t1, err := cpuTotals()
	if err != nil {
		return 0, err
	}
	if t1 == t0 {
		return 0, nil
	}
	return float64(b1-b0) / float64(t1-t0), nil
}

// WaitQuiet waits until the CPUs are less than maxBusy busy over a second,
// at most timeout; it returns the last busy fraction and whether it got
// below maxBusy.
func WaitQuiet(ctx context.Context, maxBusy float64, timeout time.Duration) (float64, bool, error) {
	deadline := time.Now().Add(timeout)
	for {
		busy, err := Busy(ctx, time.Second)
		if err != nil {
			return 0, false, err
		}
		if busy < maxBusy {
			return busy, true, nil
		}
		if time.Now().After(deadline) {
			return busy, false, nil
		}
	}
}

package embedded

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestLimitsValidate(t *testing.T) {
	with := func(f func(*Limits)) Limits {
		l := DefaultLimits()
		f(&l)
		return l
	}
	for _, tc := range []struct {
		name string
		l    Limits
		want string
	}{
		{"defaults", DefaultLimits(), ""},
		{"a store too small", with(func(l *Limits) { l.StoreBytes = 1 << 20 }), "between 32 MiB and 8 GiB"},
		{"a store the memory cannot hold", with(func(l *Limits) { l.StoreBytes = 1 << 30 }), "needs at least 12800 MiB of memory"},
		{"memory for the store", with(func(l *Limits) { l.StoreBytes, l.MemoryBytes = 1<<30, 13<<30 }), ""},
		{"processes the control plane would take", with(func(l *Limits) { l.Pids = 400 }), "at least 512 processes"},
		{"a disk too small", with(func(l *Limits) { l.DiskBytes = 100 << 20 }), "at least 1 GiB"},
		{"logs larger than the disk allows", with(func(l *Limits) { l.DiskBytes, l.Logs.MaxBytes, l.Logs.MaxFiles = 1<<30, 100<<20, 5 }), "quarter of the lab's disk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.l.Validate()
			if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want %q", err, tc.want)
			}
		})
	}
	// The flags set them, in Kubernetes' quantities.
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	l := DefaultLimits()
	l.AddFlags(fs)
	if err := fs.Parse([]string{"--lab-store-size", "64Mi", "--lab-disk", "2Gi"}); err != nil {
		t.Fatal(err)
	}
	if l.StoreBytes != 64<<20 || l.DiskBytes != 2<<30 {
		t.Errorf("store %d disk %d", l.StoreBytes, l.DiskBytes)
	}
}

package cluster

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidateName(t *testing.T) {
	for _, tc := range []struct {
		name, want string
	}{
		{"lab", ""},
		{"a", ""},
		{"lab-2", ""},
		{"", "empty"},
		{"Lab", "not valid"},
		{"-lab", "not valid"},
		{"lab-", "not valid"},
		{"la_b", "not valid"},
		{"lab.x", "not valid"},
		{strings.Repeat("a", 24), ""},
		{strings.Repeat("a", 25), "at most 24"},
	} {
		err := ValidateName(tc.name)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("ValidateName(%q) = %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestNodeNames(t *testing.T) {
	for workers, want := range map[int]string{
		0: "lab-control-plane",
		1: "lab-control-plane lab-worker",
		3: "lab-control-plane lab-worker lab-worker2 lab-worker3",
	} {
		if got := strings.Join(NodeNames("lab", workers), " "); got != want {
			t.Errorf("NodeNames(lab, %d) = %q, want %q", workers, got, want)
		}
	}
}

func TestRunActions(t *testing.T) {
	var out bytes.Buffer
	p := NewTextProgress(&out)
	now := time.Unix(0, 0)
	p.Now = func() time.Time { now = now.Add(1500 * time.Millisecond); return now }
	var ran []string
	boom := errors.New("boom")
	err := RunActions(context.Background(), p, []Action{
		{Name: "First step", Run: func(context.Context) error { ran = append(ran, "1"); return nil }},
		{Name: "Second step", Run: func(context.Context) error { ran = append(ran, "2"); return boom }},
		{Name: "Third step", Run: func(context.Context) error { ran = append(ran, "3"); return nil }},
	})
	if !errors.Is(err, boom) || err.Error() != "second step: boom" {
		t.Fatalf("err = %v", err)
	}
	if strings.Join(ran, "") != "12" {
		t.Errorf("ran %v", ran)
	}
	want := " • First step ...\n ✓ First step (1.5s)\n • Second step ...\n ✗ Second step (1.5s): boom\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = RunActions(ctx, nil, []Action{{Name: "Never", Run: func(context.Context) error { t.Error("ran after cancel"); return nil }}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

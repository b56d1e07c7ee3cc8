package views

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

func decode(t *testing.T, fs []Frame) []string {
	t.Helper()
	var out []string
	for _, f := range fs {
		var e struct {
			Topic string `json:"topic"`
			Data  any    `json:"data"`
		}
		if err := json.Unmarshal(f, &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s=%v", e.Topic, e.Data))
	}
	return out
}

func TestBusSnapshotAndLatest(t *testing.T) {
	b := NewBus(3)
	b.Publish("a", 1, false)
	b.Publish("a", 2, false)
	b.Publish("t", "x", true)
	s := b.Subscribe()
	<-s.Ready()
	if got := fmt.Sprint(decode(t, s.Take())); got != "[a=2 t=x]" {
		t.Errorf("first take %s", got)
	}
	// A subscriber that does not read keeps only the latest state frame
	// per topic and a bounded list of appended frames.
	for i := 0; i < 100; i++ {
		b.Publish("a", i, false)
		b.Publish("b", i, false)
		b.Publish("t", i, true)
	}
	if got := fmt.Sprint(decode(t, s.Take())); got != "[a=99 b=99 t=97 t=98 t=99]" {
		t.Errorf("take after 100 rounds %s", got)
	}
	if s.Dropped() == 0 {
		t.Error("no drops counted")
	}
	s.Close()
	b.Publish("a", 1, false) // no panic, no delivery
}

func TestBusSlowSubscriberDoesNotBlock(t *testing.T) {
	b := NewBus(10)
	stuck := b.Subscribe() // never reads
	defer stuck.Close()
	fast := b.Subscribe()
	done := make(chan struct{})
	got := 0
	go func() {
		defer close(done)
		for range fast.Ready() {
			for _, f := range fast.Take() {
				var e struct{ Data int }
				json.Unmarshal(f, &e)
				if e.Data == 9999 {
					return
				}
			}
			got++
		}
	}()
	start := time.Now()
	for i := 0; i <= 9999; i++ {
		b.Publish("x", i, false)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the fast subscriber never saw the last frame")
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("publishing took %v", time.Since(start))
	}
	b.Close()
	if _, ok := <-stuck.Ready(); ok {
		if _, ok := <-stuck.Ready(); ok {
			t.Error("Ready not closed after Close")
		}
	}
}

func TestDiffLines(t *testing.T) {
	before := []RuleLine{{Where: "map m", Text: "a"}, {Where: "chain c", Text: "x"}}
	now := []RuleLine{{Where: "chain c", Text: "x"}, {Where: "chain c", Text: "y"}}
	got := diffLines(before, now)
	want := "[{chain c x } {chain c y added} {map m a removed}]"
	if fmt.Sprint(got) != want {
		t.Errorf("diff %v, want %s", got, want)
	}
}

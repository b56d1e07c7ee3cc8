package events

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

func TestDiffRules(t *testing.T) {
	tests := []struct {
		name                   string
		before, after          []string
		limit                  int
		wantAdded, wantRemoved []string
		wantTruncated          bool
	}{
		{name: "identical", before: []string{"a", "b"}, after: []string{"b", "a"}},
		{name: "added and removed", before: []string{"a", "b"}, after: []string{"b", "c"}, wantAdded: []string{"c"}, wantRemoved: []string{"a"}},
		{name: "duplicates count", before: []string{"x", "x"}, after: []string{"x"}, wantRemoved: []string{"x"}},
		{name: "from nothing", after: []string{"z", "y"}, wantAdded: []string{"y", "z"}},
		{name: "limit", after: []string{"a", "b", "c"}, limit: 2, wantAdded: []string{"a", "b"}, wantTruncated: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			added, removed, trunc := DiffRules(tc.before, tc.after, tc.limit)
			if !slices.Equal(added, tc.wantAdded) || !slices.Equal(removed, tc.wantRemoved) || trunc != tc.wantTruncated {
				t.Errorf("got added=%q removed=%q truncated=%v, want %q %q %v", added, removed, trunc, tc.wantAdded, tc.wantRemoved, tc.wantTruncated)
			}
		})
	}
}

func TestBrokerSubscribeAndRecent(t *testing.T) {
	dropped := 0
	b := NewBroker(2, func() { dropped++ })
	ch, cancel := b.Subscribe(1)
	b.Publish(Event{Kind: KindSync})
	b.Publish(Event{Kind: KindFault}) // buffer full: dropped for the subscriber
	b.Publish(Event{Kind: KindSkipped})
	ev := <-ch
	if ev.Seq != 1 || ev.Kind != KindSync || ev.Time.IsZero() {
		t.Errorf("first event = %+v", ev)
	}
	if dropped != 2 {
		t.Errorf("dropped = %d, want 2", dropped)
	}
	recent := b.Recent(0)
	if len(recent) != 2 || recent[0].Seq != 2 || recent[1].Seq != 3 {
		t.Errorf("recent = %+v, want seq 2 and 3", recent)
	}
	cancel()
	cancel() // idempotent
	if _, ok := <-ch; ok {
		t.Error("channel still open after cancel")
	}
	b.Publish(Event{Kind: KindSync}) // no panic on a closed subscriber
}

func TestHandlerStreamsNDJSON(t *testing.T) {
	b := NewBroker(10, nil)
	b.Publish(Event{Kind: KindSync, Full: true, Reason: "initial"})
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(srv.Close)

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"?replay=5", nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Errorf("content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	var got []Event
	go func() {
		// Publish a live event once the replay has been read.
		time.Sleep(50 * time.Millisecond)
		b.Publish(Event{Kind: KindSkipped, Message: "stop-syncing"})
	}()
	for len(got) < 2 && sc.Scan() {
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("bad line %q: %v", sc.Text(), err)
		}
		got = append(got, ev)
	}
	if len(got) != 2 || got[0].Reason != "initial" || got[1].Kind != KindSkipped || got[1].Seq != 2 {
		t.Fatalf("stream = %+v", got)
	}
}

func TestHandlerNoFollow(t *testing.T) {
	b := NewBroker(10, nil)
	for range 3 {
		b.Publish(Event{Kind: KindSync})
	}
	rec := httptest.NewRecorder()
	b.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/events?follow=false&replay=2", nil))
	lines := 0
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		lines++
	}
	if lines != 2 {
		t.Errorf("got %d lines, want 2", lines)
	}
	rec = httptest.NewRecorder()
	b.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/events?replay=x", nil))
	if rec.Code != http.StatusBadRequest {
		t.Errorf("bad replay: code %d", rec.Code)
	}
}

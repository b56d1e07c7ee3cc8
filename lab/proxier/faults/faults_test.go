package faults

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

type fakeGauges struct {
	faults   map[string]bool
	interval int
}

func (g *fakeGauges) SetFault(name string, on bool) { g.faults[name] = on }
func (g *fakeGauges) SetSyncInterval(s int)         { g.interval = s }

func TestHandler(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		body       string
		wantCode   int
		want       State
		wantActive []string
	}{
		{name: "get default", method: "GET", wantCode: 200},
		{name: "stop syncing", method: "POST", body: `{"stopSyncing":true}`, wantCode: 200, want: State{StopSyncing: true}, wantActive: []string{StopSyncing}},
		{name: "sync every", method: "POST", body: `{"syncEverySeconds":20}`, wantCode: 200, want: State{SyncEverySeconds: 20}, wantActive: []string{SyncEvery}},
		{name: "omit service", method: "PATCH", body: `{"omitService":"demo/web"}`, wantCode: 200, want: State{OmitService: "demo/web"}, wantActive: []string{OmitService}},
		{name: "skip conntrack", method: "POST", body: `{"skipConntrackCleanup":true}`, wantCode: 200, want: State{SkipConntrackCleanup: true}, wantActive: []string{SkipConntrackCleanup}},
		{name: "bad service", method: "POST", body: `{"omitService":"web"}`, wantCode: 400},
		{name: "bad interval", method: "POST", body: `{"syncEverySeconds":-1}`, wantCode: 400},
		{name: "unknown field", method: "POST", body: `{"explode":true}`, wantCode: 400},
		{name: "wrong method", method: "PUT", wantCode: 405},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := &fakeGauges{faults: map[string]bool{}}
			var logs bytes.Buffer
			s := New(slog.New(slog.NewTextHandler(&logs, nil)), g)
			changes := 0
			s.OnChange(func(old, cur State) { changes++ })
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, httptest.NewRequest(tc.method, "/faults", strings.NewReader(tc.body)))
			if rec.Code != tc.wantCode {
				t.Fatalf("code %d, want %d: %s", rec.Code, tc.wantCode, rec.Body)
			}
			if tc.wantCode != 200 {
				if s.State() != (State{}) || changes != 0 {
					t.Errorf("rejected request changed state to %+v", s.State())
				}
				return
			}
			var got State
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want || s.State() != tc.want {
				t.Errorf("state %+v, want %+v", got, tc.want)
			}
			if !slices.Equal(got.Active(), tc.wantActive) {
				t.Errorf("active %v, want %v", got.Active(), tc.wantActive)
			}
			for _, name := range []string{SkipConntrackCleanup, StopSyncing, SyncEvery, OmitService} {
				if g.faults[name] != slices.Contains(tc.wantActive, name) {
					t.Errorf("gauge %s = %v", name, g.faults[name])
				}
			}
			if g.interval != tc.want.SyncEverySeconds {
				t.Errorf("interval gauge %d", g.interval)
			}
			if len(tc.wantActive) > 0 {
				if changes != 1 {
					t.Errorf("%d change callbacks, want 1", changes)
				}
				if !strings.Contains(logs.String(), "FAULT ENABLED: "+tc.wantActive[0]) {
					t.Errorf("no log line for the fault: %s", logs.String())
				}
			}
		})
	}
}

func TestResetAndOmitted(t *testing.T) {
	s := New(nil, nil)
	on, svc := true, "kube-system/kube-dns"
	if _, err := s.Set(t.Context(), Patch{StopSyncing: &on, OmitService: &svc}); err != nil {
		t.Fatal(err)
	}
	nn, ok := s.State().OmittedService()
	if !ok || nn.Namespace != "kube-system" || nn.Name != "kube-dns" {
		t.Errorf("omitted %v %v", nn, ok)
	}
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodDelete, "/faults", nil))
	if s.State() != (State{}) {
		t.Errorf("after DELETE: %+v", s.State())
	}
}

package healthcheck

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
)

func TestProxyHealth(t *testing.T) {
	const timeout = 60 * time.Second
	goodNode := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	deleting := goodNode.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	tainted := goodNode.DeepCopy()
	tainted.Spec.Taints = []v1.Taint{{Key: ToBeDeletedTaint, Effect: v1.TaintEffectNoSchedule}}

	tests := []struct {
		name        string
		node        *v1.Node
		steps       func(hs *ProxyHealthServer, fc *testingclock.FakeClock)
		wantHealthz int
		wantLivez   int
		wantElig    bool
	}{
		{
			name:        "fresh and synced",
			node:        goodNode,
			steps:       func(hs *ProxyHealthServer, fc *testingclock.FakeClock) { hs.Updated(v1.IPv4Protocol) },
			wantHealthz: 200, wantLivez: 200, wantElig: true,
		},
		{
			name: "queued update within the timeout",
			node: goodNode,
			steps: func(hs *ProxyHealthServer, fc *testingclock.FakeClock) {
				hs.Updated(v1.IPv4Protocol)
				hs.QueuedUpdate(v1.IPv4Protocol)
				fc.Step(timeout - time.Second)
			},
			wantHealthz: 200, wantLivez: 200, wantElig: true,
		},
		{
			name: "queued update older than the timeout",
			node: goodNode,
			steps: func(hs *ProxyHealthServer, fc *testingclock.FakeClock) {
				hs.Updated(v1.IPv4Protocol)
				hs.QueuedUpdate(v1.IPv4Protocol)
				fc.Step(time.Second)
				hs.QueuedUpdate(v1.IPv4Protocol) // does not reset the oldest
				fc.Step(timeout)
			},
			wantHealthz: 503, wantLivez: 503, wantElig: true,
		},
		{
			name: "a later update clears the queue",
			node: goodNode,
			steps: func(hs *ProxyHealthServer, fc *testingclock.FakeClock) {
				hs.QueuedUpdate(v1.IPv4Protocol)
				fc.Step(2 * timeout)
				hs.Updated(v1.IPv4Protocol)
			},
			wantHealthz: 200, wantLivez: 200, wantElig: true,
		},
		{
			name:        "no node object",
			steps:       func(hs *ProxyHealthServer, fc *testingclock.FakeClock) { hs.Updated(v1.IPv4Protocol) },
			wantHealthz: 503, wantLivez: 200,
		},
		{
			name:        "node being deleted",
			node:        deleting,
			steps:       func(hs *ProxyHealthServer, fc *testingclock.FakeClock) { hs.Updated(v1.IPv4Protocol) },
			wantHealthz: 503, wantLivez: 200,
		},
		{
			name:        "node tainted by the autoscaler",
			node:        tainted,
			steps:       func(hs *ProxyHealthServer, fc *testingclock.FakeClock) { hs.Updated(v1.IPv4Protocol) },
			wantHealthz: 503, wantLivez: 200,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			counters := Counters{
				Healthz: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "h"}, []string{"code"}),
				Livez:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "l"}, []string{"code"}),
			}
			hs := NewProxyHealthServer(timeout, func() *v1.Node { return tc.node }, counters, fc)
			tc.steps(hs, fc)

			for _, path := range []string{"/healthz", "/livez"} {
				rec := httptest.NewRecorder()
				hs.Handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
				want := tc.wantLivez
				if path == "/healthz" {
					want = tc.wantHealthz
				}
				if rec.Code != want {
					t.Errorf("%s: code %d, want %d", path, rec.Code, want)
				}
				var body ProxyHealth
				if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
					t.Fatalf("%s: %v: %s", path, err, rec.Body)
				}
				if !body.CurrentTime.Equal(fc.Now()) {
					t.Errorf("%s: currentTime %v", path, body.CurrentTime)
				}
				if path == "/healthz" {
					if body.NodeEligible == nil || *body.NodeEligible != tc.wantElig {
						t.Errorf("nodeEligible = %v, want %v", body.NodeEligible, tc.wantElig)
					}
				} else if body.NodeEligible != nil {
					t.Error("/livez must not report nodeEligible")
				}
				if rec.Code == 200 && !body.LastUpdated.Equal(fc.Now()) {
					t.Errorf("%s: healthy lastUpdated %v, want now", path, body.LastUpdated)
				}
				if _, ok := body.Status[v1.IPv4Protocol]; !ok {
					t.Errorf("%s: no IPv4 status: %s", path, rec.Body)
				}
			}
			if got := testutil.ToFloat64(counters.Healthz.WithLabelValues(itoa(tc.wantHealthz))); got != 1 {
				t.Errorf("healthz counter for %d = %v", tc.wantHealthz, got)
			}
		})
	}
}

func itoa(code int) string {
	if code == 200 {
		return "200"
	}
	return "503"
}

// loopbackListener maps every requested port to a free loopback port and
// remembers where each went.
type loopbackListener struct {
	mu    sync.Mutex
	addrs map[string]string
	fail  map[string]bool
}

func (l *loopbackListener) listen(ctx context.Context, network, addr string) (net.Listener, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail[addr] {
		return nil, &net.OpError{Op: "listen", Net: network, Err: io.ErrClosedPipe}
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l.addrs[addr] = ln.Addr().String()
	return ln, nil
}

func (l *loopbackListener) addr(a string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.addrs[a]
}

func TestServiceHealth(t *testing.T) {
	web := types.NamespacedName{Namespace: "demo", Name: "web"}
	tests := []struct {
		name       string
		endpoints  int
		healthy    bool
		wantCode   int
		wantWeight string
	}{
		{name: "local endpoints and healthy", endpoints: 2, healthy: true, wantCode: 200, wantWeight: "2"},
		{name: "no local endpoints", endpoints: 0, healthy: true, wantCode: 503, wantWeight: "0"},
		{name: "proxy unhealthy", endpoints: 1, healthy: false, wantCode: 503, wantWeight: "1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ll := &loopbackListener{addrs: map[string]string{}}
			s := NewServiceHealthServer(nil, "tcp4", nil, func() bool { return tc.healthy }, ll.listen)
			t.Cleanup(s.Close)
			if err := s.SyncServices(t.Context(), map[types.NamespacedName]uint16{web: 30100}); err != nil {
				t.Fatal(err)
			}
			s.SyncEndpoints(map[types.NamespacedName]int{web: tc.endpoints})
			resp, err := http.Get("http://" + ll.addr("0.0.0.0:30100") + "/")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantCode {
				t.Errorf("code %d, want %d", resp.StatusCode, tc.wantCode)
			}
			if w := resp.Header.Get("X-Load-Balancing-Endpoint-Weight"); w != tc.wantWeight {
				t.Errorf("weight %q, want %q", w, tc.wantWeight)
			}
			want := "{\n\t\"service\": {\n\t\t\"namespace\": \"demo\",\n\t\t\"name\": \"web\"\n\t},\n\t\"localEndpoints\": " + tc.wantWeight + ",\n\t\"serviceProxyHealthy\": " + map[bool]string{true: "true", false: "false"}[tc.healthy] + "\n}"
			if string(body) != want {
				t.Errorf("body:\n%s\nwant:\n%s", body, want)
			}
		})
	}
}

func TestServiceHealthSyncServices(t *testing.T) {
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	b := types.NamespacedName{Namespace: "ns", Name: "b"}
	ll := &loopbackListener{addrs: map[string]string{}, fail: map[string]bool{"0.0.0.0:30002": true}}
	s := NewServiceHealthServer(nil, "tcp4", nil, nil, ll.listen)
	t.Cleanup(s.Close)

	err := s.SyncServices(t.Context(), map[types.NamespacedName]uint16{a: 30001, b: 30002})
	if err == nil {
		t.Error("want an error for the port that cannot be opened")
	}
	if got := s.Ports(); len(got) != 1 || got[a] != 30001 {
		t.Errorf("ports %v", got)
	}
	oldAddr := ll.addr("0.0.0.0:30001")
	// Port change: the old listener closes, a new one opens.
	if err := s.SyncServices(t.Context(), map[types.NamespacedName]uint16{a: 30003}); err != nil {
		t.Fatal(err)
	}
	if got := s.Ports(); len(got) != 1 || got[a] != 30003 {
		t.Errorf("ports after change %v", got)
	}
	if _, err := http.Get("http://" + oldAddr + "/"); err == nil {
		t.Error("old listener still serving")
	}
	if err := s.SyncServices(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if len(s.Ports()) != 0 {
		t.Error("listeners left after removing every service")
	}
}

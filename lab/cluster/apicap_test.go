package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/svclab/svclab/lab/cluster"
)

// A lab's API server that answers with more than svclab reads gets an
// error naming the bound: a list over MaxAPIResponse; a watch event over
// client-go's own bound; a long watch of small events and answers within
// the bounds go through.
func TestAPIResponsesAreBounded(t *testing.T) {
	item := func(i int, pad int) string {
		return fmt.Sprintf(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c%d","namespace":"default"},"data":{"k":"%s"}}`, i, strings.Repeat("x", pad))
	}
	list := func(n, pad int) string {
		var b strings.Builder
		b.WriteString(`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[`)
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(item(i, pad))
		}
		b.WriteString("]}")
		return b.String()
	}
	big, small := list(70, 1<<20), list(3, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		ns := strings.Split(r.URL.Path, "/")[4]
		if r.URL.Query().Get("watch") == "true" {
			pad, n := 100, 100_000 // 100,000 small events: 18 MB in all
			if ns == "huge" {
				pad, n = 17<<20, 1
			}
			for i := range n {
				fmt.Fprintf(w, `{"type":"ADDED","object":%s}`+"\n", item(i, pad))
			}
			return
		}
		if ns == "huge" {
			w.Write([]byte(big))
			return
		}
		w.Write([]byte(small))
	}))
	defer srv.Close()
	kubeconfig := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: lab, cluster: {server: %q}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: lab, context: {cluster: lab, user: u}}]\ncurrent-context: lab\n", srv.URL)
	cfg, err := cluster.RESTConfigFromKubeconfig([]byte(kubeconfig))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if l, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 3 {
		t.Errorf("a small list: %v", err)
	}
	if _, err := cs.CoreV1().ConfigMaps("huge").List(ctx, metav1.ListOptions{}); !errors.Is(err, cluster.ErrAPIResponseTooLarge) {
		t.Errorf("a list of 70 MiB: %v, want ErrAPIResponseTooLarge", err)
	} else if !strings.Contains(err.Error(), "over 64 MiB") {
		t.Errorf("the error does not name the bound: %v", err)
	}
	w, err := cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ev := range w.ResultChan() {
		if ev.Type == "ERROR" {
			t.Errorf("event %d: %v", n, ev.Object)
		}
		n++
	}
	if n != 100_000 {
		t.Errorf("a watch of 100,000 small events delivered %d", n)
	}
	w, err = cs.CoreV1().ConfigMaps("huge").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for ev := range w.ResultChan() {
		if st, ok := ev.Object.(*metav1.Status); ev.Type != "ERROR" || !ok || !strings.Contains(st.Message, "longer than maximum allowed size") {
			t.Errorf("an event of 17 MiB: %s %v", ev.Type, ev.Object)
		}
	}
}

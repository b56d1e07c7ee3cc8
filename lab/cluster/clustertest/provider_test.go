package clustertest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/svclab/svclab/lab/cluster"
)

func TestProvider(t *testing.T) {
	ctx := context.Background()
	p := NewProvider("lab")
	c, err := p.Get(ctx, "lab")
	if err != nil || c.Name() != "lab" {
		t.Fatalf("existing cluster: %v, %v", c, err)
	}
	if again, _ := p.Get(ctx, "lab"); again != c {
		t.Error("Get hands out another cluster each time")
	}
	made, err := p.Create(ctx, cluster.CreateOptions{Name: "ex", Workers: 1, NodeLabels: map[string]map[string]string{"ex-worker": {"zone": "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	nodes, _ := made.Nodes(ctx)
	if len(nodes) != 2 || nodes[1].Name != "ex-worker" || nodes[1].Labels["zone"] != "a" {
		t.Errorf("created nodes %+v", nodes)
	}
	if _, err := p.Create(ctx, cluster.CreateOptions{Name: "ex"}); !errors.Is(err, cluster.ErrExists) {
		t.Errorf("second create: %v", err)
	}
	if o := p.Options("ex"); o.Workers != 1 {
		t.Errorf("options %+v", o)
	}
	list, _ := p.List(ctx)
	if len(list) != 2 || list[0].Name != "ex" || list[1].Name != "lab" || list[0].Backend != "embedded" {
		t.Errorf("list %+v", list)
	}

	// A cluster added, and clusters made by the test.
	p.Add(NewCluster("k", WithBackend("kind")))
	if c, _ := p.Get(ctx, "k"); c.(*Cluster).Backend() != "kind" {
		t.Errorf("added cluster %v", c)
	}
	p.MakeWith(func(o cluster.CreateOptions) *Cluster { return NewCluster(o.Name, WithBackend("made")) })
	if c, _ := p.Create(ctx, cluster.CreateOptions{Name: "m"}); c.(*Cluster).Backend() != "made" {
		t.Errorf("made cluster %v", c)
	}

	p.FailWith(errors.New("no room"))
	if _, err := p.Create(ctx, cluster.CreateOptions{Name: "f"}); err == nil || err.Error() != "no room" {
		t.Errorf("failed create: %v", err)
	}
	if _, err := p.Get(ctx, "f"); !errors.Is(err, cluster.ErrNotFound) {
		t.Errorf("a failed cluster is left: %v", err)
	}

	if err := p.Delete(ctx, "lab"); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(ctx, "lab"); !errors.Is(err, cluster.ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
	if got, want := p.Names(), []string{"ex", "k", "m"}; !slices.Equal(got, want) {
		t.Errorf("names %q, want %q", got, want)
	}
	if !slices.Equal(p.Created, []string{"ex", "m", "f"}) || !slices.Equal(p.Deleted, []string{"lab"}) {
		t.Errorf("created %q, deleted %q", p.Created, p.Deleted)
	}
	if err := p.DeleteAll(ctx, nil); err == nil {
		t.Error("DeleteAll is allowed")
	}
}

// A creation cancelled while held rolls back.
func TestProviderGate(t *testing.T) {
	p := NewProvider()
	p.SetGate()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Create(ctx, cluster.CreateOptions{Name: "lab"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled create: %v", err)
	}
	if len(p.Names()) != 0 {
		t.Errorf("left %q", p.Names())
	}
	gate := p.SetGate()
	close(gate)
	if _, err := p.Create(context.Background(), cluster.CreateOptions{Name: "lab"}); err != nil {
		t.Errorf("released create: %v", err)
	}
}

// A cluster deleted and created again under its name is a new life of it
// (a new cluster.Generation), as the real backends' are.
func TestProviderCreatedAgainIsNewLife(t *testing.T) {
	ctx := context.Background()
	p := NewProvider("lab")
	gens := map[string]bool{}
	for i := range 3 {
		c, err := p.Get(ctx, "lab")
		if err != nil {
			t.Fatal(err)
		}
		gen, err := cluster.Generation(c)
		if err != nil {
			t.Fatal(err)
		}
		if gens[gen] {
			t.Fatalf("life %d has an earlier life's generation %s", i, gen)
		}
		gens[gen] = true
		if err := p.Delete(ctx, "lab"); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Create(ctx, cluster.CreateOptions{Name: "lab"}); err != nil {
			t.Fatal(err)
		}
	}
}

//go:build linux

package daemon

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/svclab/svclab/lab/proxier/flowtest"
	"github.com/svclab/svclab/lab/proxier/iptables"
)

// countingIPTables counts the iptables runs of the jump-rule checks and
// keeps the restore inputs.
type countingIPTables struct {
	ExecIPTables
	chains, rules int
	restores      []string
}

func (c *countingIPTables) Restore(ctx context.Context, data []byte) error {
	c.restores = append(c.restores, string(data))
	return c.ExecIPTables.Restore(ctx, data)
}

func (c *countingIPTables) EnsureChain(ctx context.Context, table, chain string) error {
	c.chains++
	return c.ExecIPTables.EnsureChain(ctx, table, chain)
}

func (c *countingIPTables) EnsureRule(ctx context.Context, table, chain string, args []string) error {
	c.rules++
	return c.ExecIPTables.EnsureRule(ctx, table, chain, args)
}

// iptablesLab returns a lab for network namespaces of the test's own,
// removed when it ends; the test is skipped without root or with -short.
func iptablesLab(t *testing.T, prefix string) *flowtest.Sandbox {
	t.Helper()
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces and iptables")
	}
	lab := flowtest.NewSandbox(prefix, nil)
	t.Cleanup(func() {
		if err := lab.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return lab
}

// On the real iptables (in a namespace of its own), the first full sync
// adds the jump rules in one iptables-restore, and a later full sync finds
// them all in what iptables-save prints: the saved form of every jump
// rule is the one the applier looks for. iptables itself never runs.
func TestIPTablesJumpRulesFromSave(t *testing.T) {
	ctx := context.Background()
	lab := iptablesLab(t, "svjr")
	ns, err := lab.Netns(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	snap := newHarness(t).snapshot(baseObjects)
	run := &countingIPTables{}
	a := NewIPTablesApplier(iptablesConfig(t), run, nil)
	saveHas := func(j iptables.JumpRule) bool {
		save, err := run.Save(ctx, j.Table)
		if err != nil {
			t.Fatal(err)
		}
		return parseSave(save).hasRule(j.Chain, j.Args)
	}
	err = ns.Do(func() error {
		if _, err := a.Apply(ctx, snap, true); err != nil {
			return err
		}
		if run.rules != 0 || run.chains != 0 || len(run.restores) != 2 {
			t.Errorf("first sync: %d chain and %d rule checks with iptables and %d restores, want none, none and 2", run.chains, run.rules, len(run.restores))
		}
		for _, j := range iptables.JumpRules() {
			if !saveHas(j) {
				t.Errorf("after the first sync, %s %s lacks %q", j.Table, j.Chain, j.Args)
			}
		}
		run.restores = nil
		if _, err := a.Apply(ctx, snap, true); err != nil {
			return err
		}
		if run.rules != 0 || run.chains != 0 || len(run.restores) != 1 {
			t.Errorf("second full sync: %d chain and %d rule checks and %d restores, want only the ruleset's", run.chains, run.rules, len(run.restores))
		}
		// A jump rule deleted by hand is put back by the next full sync.
		j := iptables.JumpRules()[0]
		args := []string{"-t", j.Table, "-D", j.Chain}
		for _, a := range j.Args {
			args = append(args, strings.Trim(a, `"`))
		}
		if out, err := run.run(ctx, args...); err != nil {
			t.Fatalf("deleting a jump rule: %v: %s", err, out)
		}
		run.restores = nil
		if _, err := a.Apply(ctx, snap, true); err != nil {
			return err
		}
		if want := "*" + j.Table + "\n-I " + j.Chain + " " + strings.Join(j.Args, " ") + "\nCOMMIT\n"; len(run.restores) != 2 || run.restores[0] != want {
			t.Errorf("after deleting a jump rule, restores %q, want first %q", run.restores, want)
		}
		if !saveHas(j) {
			t.Error("the deleted jump rule was not put back")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// manyServices is a manifest of n Services with three endpoints each,
// every other one a NodePort Service.
func manyServices(n int) string {
	var m strings.Builder
	for i := range n {
		typ := "ClusterIP"
		if i%2 == 1 {
			typ = "NodePort"
		}
		fmt.Fprintf(&m, `apiVersion: v1
kind: Service
metadata: {namespace: many, name: svc%d}
spec: {type: %s, clusterIP: 172.30.%d.%d, ports: [{name: http, port: 80, protocol: TCP, nodePort: %d}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {namespace: many, name: svc%d-1, labels: {kubernetes.io/service-name: svc%d}}
addressType: IPv4
endpoints: [{addresses: [10.1.%d.1], nodeName: test-node}, {addresses: [10.1.%d.2], nodeName: node-b}, {addresses: [10.1.%d.3], nodeName: node-b}]
ports: [{name: http, port: 80, protocol: TCP}]
---
`, i, typ, i/250, i%250+1, 30000+i, i, i, i, i, i)
	}
	return m.String()
}

// On the real iptables, a first sync that restores its new chains in
// transactions of their own leaves the same rules as one transaction;
// the next full sync (the chains exist) is one transaction again.
func TestIPTablesNewChainsInTransactions(t *testing.T) {
	ctx := context.Background()
	lab := iptablesLab(t, "svst")
	snap := newHarness(t).snapshot(manyServices(150))
	save := func(ns flowtest.Netns, run IPTablesRunner) string {
		var out strings.Builder
		err := ns.Do(func() error {
			for _, table := range []string{"filter", "nat"} {
				b, err := run.Save(ctx, table)
				if err != nil {
					return err
				}
				for line := range strings.SplitSeq(string(b), "\n") {
					if !strings.HasPrefix(line, "#") {
						out.WriteString(line + "\n")
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	sync := func(name string, stepLines int) (rules string, transactions int) {
		ns, err := lab.Netns(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		run := &countingIPTables{}
		a := NewIPTablesApplier(iptablesConfig(t), run, nil)
		a.StepLines = stepLines
		err = ns.Do(func() error {
			_, err := a.Apply(ctx, snap, true)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		got := save(ns, run)
		transactions = strings.Count(run.restores[len(run.restores)-1], "COMMIT\n")
		// A later full sync: the chains exist, one transaction.
		run.restores = nil
		err = ns.Do(func() error {
			_, err := a.Apply(ctx, snap, true)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(run.restores) != 1 || strings.Count(run.restores[0], "COMMIT") != 2 {
			t.Errorf("StepLines %d: second full sync restored %d inputs, want one of two transactions (filter, nat)", stepLines, len(run.restores))
		}
		if again := save(ns, run); again != got {
			t.Errorf("StepLines %d: the second full sync changed the rules", stepLines)
		}
		return got, transactions
	}
	one, n := sync("one", 0)
	if n != 2 {
		t.Errorf("StepLines 0: the first sync restored %d transactions, want 2 (filter, nat)", n)
	}
	steps, n := sync("steps", 300)
	if n < 5 {
		t.Errorf("StepLines 300: the first sync restored %d transactions, want the nat table's new chains in several", n)
	}
	if !strings.Contains(one, "-j KUBE-SVC-") || strings.Count(one, "\n") < 1000 {
		t.Fatalf("the rules look incomplete:\n%s", one)
	}
	if one != steps {
		t.Errorf("rules after restoring new chains in steps differ from those of one transaction:\n%s", cmp.Diff(one, steps))
	}
}

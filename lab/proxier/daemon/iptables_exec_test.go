package daemon

import (
	"context"
	"os"
	"strings"
	"testing"

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

// On the real iptables (in a namespace of its own), the first full sync
// adds the jump rules in one iptables-restore, and a later full sync finds
// them all in what iptables-save prints: the saved form of every jump
// rule is the one the applier looks for. iptables itself never runs.
func TestIPTablesJumpRulesFromSave(t *testing.T) {
	if testing.Short() || os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace and iptables")
	}
	ctx := context.Background()
	lab := flowtest.NewLab("svjr", nil)
	t.Cleanup(func() {
		if err := lab.Close(ctx); err != nil {
			t.Error(err)
		}
	})
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

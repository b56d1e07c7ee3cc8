package grade

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkGradeOverhead grades the fixed selector-typo scenario against a
// fake cluster whose node commands take 30 ms and whose Pod execs take
// 150 ms, as on a real cluster: it measures what the grader adds to its
// slowest command (running checks and a dataplane check's nodes at once,
// reading objects through one client), not the cluster. A real cluster's
// gradings are measured by BenchmarkGrade in lab/session.
//
//	go test -run '^$' -bench GradeOverhead ./lab/grade/
func BenchmarkGradeOverhead(b *testing.B) {
	s := loadScenario(b, "selector-typo")
	nodes := func(_ string, cmd []string) (string, error) {
		time.Sleep(30 * time.Millisecond)
		switch strings.Join(cmd, " ") {
		case "curl -sS -f -m 5 http://127.0.0.1:10249/proxyMode":
			return "nftables", nil
		case "nft list table ip kube-proxy":
			return nftTable(true), nil
		}
		return "", fmt.Errorf("unexpected %v", cmd)
	}
	pods := podExecFunc(func(_, _ string, _ []string) (string, error) {
		time.Sleep(150 * time.Millisecond)
		var out strings.Builder
		for i := 1; i <= 20; i++ {
			fmt.Fprintf(&out, "@@ %d 0 web-%c\n", i, 'a'+i%2)
		}
		return out.String(), nil
	})
	g := newGrader(nodes, pods, shop("web", "10.244.1.5", "10.244.2.5")...)
	ctx := context.Background()
	base, err := g.Record(ctx, s)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if rep := g.Grade(ctx, s, base); !rep.Passed {
			b.Fatalf("the fixed scenario scores %.0f%%: %+v", rep.Score, rep.Failed())
		}
	}
}

package class

import (
	"context"
	"testing"
	"time"

	"github.com/svclab/svclab/internal/pgtest"
)

// BenchmarkBoardChecked records a check run on the board: the database
// write (SQLite or PostgreSQL) and the fan-out to 30 subscribers (the
// instructor's board and learners' pages), some of which never read.
func BenchmarkBoardChecked(b *testing.B) { pgtest.ForEachBackendB(b, DBFileName, benchBoardChecked) }

func benchBoardChecked(b *testing.B, be pgtest.Backend) {
	ctx := context.Background()
	db, err := OpenDB(ctx, be.Location(b), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	spec := Spec{Name: "bench", Scenarios: []string{"selector-typo"}}
	if _, err := spec.Normalize(Catalog(nil)); err != nil {
		b.Fatal(err)
	}
	created, err := db.CreateClass(ctx, spec)
	if err != nil {
		b.Fatal(err)
	}
	board, err := newBoard(ctx, db, created.Class, time.Now)
	if err != nil {
		b.Fatal(err)
	}
	j, _, err := db.Join(ctx, created.Class.JoinCode, "Ann")
	if err != nil {
		b.Fatal(err)
	}
	board.AddLearner(j.Learner)
	for i := range 30 {
		s := board.subscribe("", 64)
		if i%3 != 0 {
			go func() {
				for range s.C {
				}
			}()
		}
	}
	rep := report(true, false, true)
	b.ResetTimer()
	for range b.N {
		if err := board.Checked(ctx, j.Learner.ID, "selector-typo", rep); err != nil {
			b.Fatal(err)
		}
	}
}

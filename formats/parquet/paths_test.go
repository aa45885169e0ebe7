package parquet

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/formatstest"
)

// streamedPath names one of the reader's streamed paths for readPaths.
type streamedPath struct {
	toggles    []*bool       // the variables that turn it on (all false: arrow-go's path)
	pages      *atomic.Int64 // the counter of the pages it reads
	pieces     bool          // it reads row groups in pieces (of 1998 rows here), arrow-go's path whole
	sameErrors bool          // both paths report the same error text, not only both an error
}

// readPaths reads list with the streamed path p and with arrow-go's column
// reader, each with 1 and 3 workers, checks that all four give the same
// samples (and that all or none fail, with the same error on the streamed
// path), and returns the streamed path's samples with 1 worker, its error,
// and the pages it read.
func readPaths(t *testing.T, list string, s *formats.Schema, o Options, p streamedPath) (*formatstest.Dataset, error, int64) {
	t.Helper()
	saved := make([]bool, len(p.toggles))
	for i, v := range p.toggles {
		saved[i] = *v
	}
	defer func(m int) {
		for i, v := range p.toggles {
			*v = saved[i]
		}
		minPieceRows = m
	}(minPieceRows)
	if p.pieces {
		minPieceRows = 1500 // the streamed path cuts the row group into pieces of 1998 rows
	}
	var first *formatstest.Dataset
	var firstErr error
	var pages int64
	for _, streamed := range []bool{true, false} {
		for _, workers := range []int{1, 3} {
			for _, v := range p.toggles {
				*v = streamed
			}
			o.Workers, o.BatchSize = workers, 999
			before := p.pages.Load()
			r, err := OpenList(list, s, o)
			if err != nil {
				t.Fatal(err)
			}
			got, err := formatstest.ReadAll(r, 999, 0)
			r.Close()
			if n := p.pages.Load() - before; !streamed && n != 0 {
				t.Fatalf("arrow-go's path read %d pages through the streamed one", n)
			}
			if p.pieces {
				if want := int(r.NumRows() / 1998); streamed && err == nil && r.pieces < want {
					t.Fatalf("the streamed path read %d rows in %d pieces, want %d or more", r.NumRows(), r.pieces, want)
				} else if !streamed && err == nil && r.pieces != r.numRG {
					t.Fatalf("arrow-go's path read %d row groups in %d pieces", r.numRG, r.pieces)
				}
			}
			if streamed && workers == 1 {
				first, firstErr, pages = got, err, p.pages.Load()-before
				continue
			}
			if (err == nil) != (firstErr == nil) || ((streamed || p.sameErrors) && fmt.Sprint(err) != fmt.Sprint(firstErr)) {
				t.Fatalf("streamed %v, %d workers: error %v, the streamed path with 1 worker: %v", streamed, workers, err, firstErr)
			}
			if err == nil {
				if d := formatstest.Diff(first, got); d != "" {
					t.Fatalf("streamed %v, %d workers: %s", streamed, workers, d)
				}
			}
		}
	}
	return first, firstErr, pages
}

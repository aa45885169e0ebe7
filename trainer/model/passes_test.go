package model

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/trainer/input"
)

// TestStartPasses: a prefetcher started on passes hands out every pass's
// batches in order with io.EOF on each pass's last, opens each pass once
// and closes every reader it opened, stops after its pass limit, and
// reports an error opening a pass and a pass of another schema after the
// io.EOF of the pass before; on the CPU and the staged path.
func TestStartPasses(t *testing.T) {
	data := newPlanted(1, 150, 4, smallSlots) // 64, 64, 22 a pass
	other := newPlanted(1, 150, 5, smallSlots)
	for _, staged := range []bool{false, true} {
		m := cacheModel(t, cpuBackend(t), "dlrm", 64)
		if staged {
			m = cacheModel(t, newStagingBackend(t), "dlrm", 64)
		}
		var opened, closed int
		pass := 0
		errOpen := errors.New("no fourth pass")
		open := func() (formats.Reader, error) {
			pass++
			if pass == 4 {
				return nil, errOpen
			}
			opened++
			return &closeCounter{Reader: data.reader(64), n: &closed}, nil
		}
		next := func(pf *input.Prefetcher) (int, error) {
			st := pf.Next()
			pf.Release(st)
			return st.N, st.Err
		}
		// A limit of 2 passes: 64 64 22·EOF 64 64 22·EOF, then EOF.
		pf := input.NewPrefetcher(m.feed)
		if err := pf.StartPasses(open, 2); err != nil {
			t.Fatal(err)
		}
		var got []int
		for i := 0; i < 8; i++ {
			n, err := next(pf)
			if err == io.EOF {
				n = -n - 1 // mark the pass's end
			} else if err != nil {
				t.Fatal(err)
			}
			got = append(got, n)
		}
		want := []int{64, 64, -23, 64, 64, -23, -1, -1}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("staged %v: batches %v, want %v (−n−1: n with io.EOF)", staged, got, want)
			}
		}
		pf.Stop()
		if opened != 2 || closed != 2 {
			t.Errorf("staged %v: %d opened, %d closed", staged, opened, closed)
		}
		// No limit: pass 3, then the error opening pass 4.
		if err := pf.StartPasses(open, 0); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			if _, err := next(pf); err != nil && (i < 2 || err != io.EOF) {
				t.Fatalf("staged %v: batch %d: %v", staged, i, err)
			}
		}
		if _, err := next(pf); !errors.Is(err, errOpen) {
			t.Errorf("staged %v: after the pass, %v (want the open error)", staged, err)
		}
		pf.Stop()
		// A second pass of another schema: refused after the first's io.EOF.
		pass = 0
		if err := pf.StartPasses(func() (formats.Reader, error) {
			pass++
			if pass == 2 {
				return other.reader(64), nil
			}
			return data.reader(64), nil
		}, 0); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			next(pf)
		}
		if _, err := next(pf); err == nil || err == io.EOF {
			t.Errorf("staged %v: a pass of another schema: %v", staged, err)
		}
		pf.Close()
		if closed != opened {
			t.Errorf("staged %v: %d opened, %d closed", staged, opened, closed)
		}
	}
}

// TestStartPassesOpensAhead: the next pass is opened while the consumer
// still holds a batch of the pass before (the pipeline does not drain at
// a pass boundary: Stop, reopen and Start made the training goroutine wait
// for the reopened reader's first batch at each end of data).
func TestStartPassesOpensAhead(t *testing.T) {
	data := newPlanted(1, 192, 4, smallSlots) // three full batches, io.EOF with the third
	m := cacheModel(t, cpuBackend(t), "dlrm", 64)
	opens := make(chan int, 4)
	n := 0
	pf := input.NewPrefetcher(m.feed)
	if err := pf.StartPasses(func() (formats.Reader, error) { n++; opens <- n; return data.reader(64), nil }, 0); err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	<-opens
	pf.Release(pf.Next())
	held := pf.Next() // the second batch of pass 1, not handed back yet
	if held.N != 64 || held.Err != nil {
		t.Fatalf("second batch: %d samples, %v", held.N, held.Err)
	}
	select {
	case k := <-opens:
		if k != 2 {
			t.Fatalf("open %d", k)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second pass was not opened while the first pass's batches were still being trained")
	}
	pf.Release(held)
	if st := pf.Next(); st.N != 64 || st.Err != io.EOF {
		t.Errorf("pass 1's last batch: %d samples, %v", st.N, st.Err)
	} else {
		pf.Release(st)
	}
	if st := pf.Next(); st.N != 64 || st.Err != nil {
		t.Errorf("pass 2's first batch: %d samples, %v", st.N, st.Err)
	} else {
		pf.Release(st)
	}
}

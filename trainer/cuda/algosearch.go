package cuda

import (
	"fmt"
	"math"
	"slices"
	"time"
	"unsafe"
)

// The algorithm search (HugeCTR's solver key algorithm_search).
//
// cuBLASLt's heuristic ranks the algorithms of a matmul descriptor by a
// model, and its first choice is not always the fastest: on the H200 the
// epilogue matmuls of the fused InnerProduct ran 2–3× slower than the plain
// GEMM of the same shape with it. With a search, the first call of each
// descriptor (ltKey: shape, transposes, leading dimensions, epilogue,
// arithmetic, element types, the operands' alignment) asks the heuristic for up to
// AlgoSearch.Candidates algorithms, drops those that report a failure or
// need more than the workspace, runs each on the call's own operands once
// untimed, then AlgoSearch.Reps rounds in which every candidate still in
// runs once between two CUDA events on the call's stream (interleaved, so
// other streams' work falls on all of them alike), and keeps the one with
// the smallest median for every later call of that descriptor (the plans
// are per device context). A plain GEMM
// (GemmSearch) also times cuBLAS's own choice (Gemm), so a search never
// picks something slower than what runs without one. Candidates that fail
// to launch are skipped; if all fail, a plain GEMM runs through cuBLAS and
// an epilogue call reports ErrNoAlgorithm (its callers fall back to the
// unfused operations).
//
// Results: the search only chooses among algorithms that compute the same
// product in the same arithmetic; they may tile, split k and so sum in a
// different order, so results can differ in the last bits between a
// searched and an unsearched run (and between two devices), within the
// usual FP32/TF32 bounds. Once chosen, an algorithm is deterministic run
// to run.
//
// What a search costs: when beta ≠ 0 (C is read) C is copied aside first
// and restored after the timed runs, so the call computes what it would
// without the search; the stream is synchronised before and after. It
// happens on the host's first call of each descriptor, which is in the
// first (eager) training step. A descriptor first met while its stream is
// being captured into a CUDA graph is not searched then (no timing or
// synchronisation is legal there): the captured call uses the heuristic's
// first choice, and the next call outside a capture searches.
//
// HugeCTR (v23 fully_connected_layer.cu, search_algorithm) times each of
// cublasGemmEx's algorithm ids 100 times on the layer's buffers once,
// before training, and its fused fp16 layers do the same over
// cublasLtMatmulAlgoGetHeuristic's results; ctrkit searches lazily per
// descriptor, which covers every GEMM (MLP, MultiCross, backward) without
// a per-layer hook.

// AlgoSearch configures the search and counts what it cost. One value is
// shared by a backend's calls (LtArgs.Search, GemmSearch); its fields are
// used on the device goroutine only.
type AlgoSearch struct {
	// Candidates is how many algorithms the heuristic is asked for
	// (0: 16; cuBLASLt returns fewer when it has fewer).
	Candidates int
	// Reps is how many timed runs each candidate gets after one untimed
	// run; the median decides (0: 5).
	Reps int
	// Stats is what the searches have done so far.
	Stats AlgoSearchStats
}

// AlgoSearchStats are the searches' costs and outcomes.
type AlgoSearchStats struct {
	// Descriptors is the number of descriptors searched.
	Descriptors int
	// Timed is the number of candidates timed over all of them (cuBLAS's
	// own GEMM counted as one), Failed those skipped because they did not
	// run.
	Timed, Failed int
	// Changed is how many searches chose something other than the
	// heuristic's first choice (for a plain GEMM: other than cuBLAS's own
	// GEMM), and FirstMs and BestMs the sums over all searches of the
	// median milliseconds of that first choice and of the one chosen.
	Changed         int
	FirstMs, BestMs float64
	// Millis is the host time the searches took, timed runs included.
	Millis float64
	// Deferred counts descriptors first met during a stream capture (their
	// search ran, or runs, at their next call outside one).
	Deferred int
}

// String is a one-line summary for logs.
func (s AlgoSearchStats) String() string {
	return fmt.Sprintf("%d descriptors, %d candidates timed (%d failed) in %.1f ms; %d changed from the first choice (%.3f → %.3f ms per call, summed)",
		s.Descriptors, s.Timed, s.Failed, s.Millis, s.Changed, s.FirstMs, s.BestMs)
}

func (a *AlgoSearch) candidates() int {
	if a.Candidates <= 0 {
		return 16
	}
	return a.Candidates
}

func (a *AlgoSearch) reps() int {
	if a.Reps <= 0 {
		return 5
	}
	return a.Reps
}

// capturing reports whether s is being captured into a CUDA graph (false
// when the driver has no cuStreamIsCapturing, or it fails).
func (c *Ctx) capturing(s Stream) bool {
	if blasLt.streamIsCapturing == 0 {
		return false
	}
	var st int32 // CU_STREAM_CAPTURE_STATUS_NONE 0, ACTIVE 1, INVALIDATED 2
	if call(blasLt.streamIsCapturing, uintptr(s), uintptr(unsafe.Pointer(&st))) != 0 {
		return false
	}
	return st != 0
}

// candTimer runs candidates of one descriptor for pickFastest.
type candTimer interface {
	// warm runs candidate i once, untimed; an error skips it.
	warm(i int) error
	// round runs each candidate of live once, in order, and returns each
	// run's milliseconds: NaN for one that failed to run (it is skipped
	// from then on). An error ends the search.
	round(live []int) ([]float64, error)
}

// pickFastest times candidates 0..n-1 — a warm-up run each, then reps
// rounds that run every candidate still in once, so that whatever else the
// device does meanwhile falls on all of them alike — and returns the index
// of the smallest median (the earlier one on a tie, so the heuristic's
// order decides between equals), or -1 when none ran; medians holds each
// candidate's median, NaN for those skipped. err is the timer's.
func pickFastest(n, reps int, t candTimer) (best int, medians []float64, err error) {
	best = -1
	medians = make([]float64, n)
	var live []int
	for i := range medians {
		medians[i] = math.NaN()
		if t.warm(i) == nil {
			live = append(live, i)
		}
	}
	runs := make([][]float32, n)
	for r := 0; r < reps && len(live) > 0; r++ {
		ms, err := t.round(live)
		if err != nil {
			return -1, medians, err
		}
		next := live[:0]
		for j, i := range live {
			if j < len(ms) && !math.IsNaN(ms[j]) && ms[j] >= 0 {
				runs[i] = append(runs[i], float32(ms[j]))
				next = append(next, i)
			} else {
				runs[i] = nil
			}
		}
		live = next
	}
	for _, i := range live {
		m := median(runs[i])
		medians[i] = m
		if best < 0 || m < medians[best] {
			best = i
		}
	}
	return best, medians, nil
}

// median is the middle value of ts (the mean of the two middle ones for an
// even count); NaN for none.
func median(ts []float32) float64 {
	if len(ts) == 0 {
		return math.NaN()
	}
	s := slices.Clone(ts)
	slices.Sort(s)
	h := len(s) / 2
	if len(s)%2 == 1 {
		return float64(s[h])
	}
	return (float64(s[h-1]) + float64(s[h])) / 2
}

// ltTimer times a plan's candidates on a call's operands; index
// len(cands) is the call's cuBLAS GEMM when it has one.
type ltTimer struct {
	c     *Ctx
	p     *ltPlan
	cl    *ltCall
	ws    Ptr
	cands [][ltResultSize]byte
	ev    []Event // two per candidate
}

func (t *ltTimer) run(i int) error {
	if i == len(t.cands) {
		return t.cl.legacy()
	}
	return blasCheck("cublasLtMatmul", t.c.ltRun(t.p, &t.cands[i], t.cl, t.ws))
}

func (t *ltTimer) warm(i int) error { return t.run(i) }

func (t *ltTimer) round(live []int) ([]float64, error) {
	c, s := t.c, t.cl.s
	ms := make([]float64, len(live))
	ran := make([]bool, len(live))
	for j, i := range live {
		if err := c.Record(t.ev[2*j], s); err != nil {
			return nil, err
		}
		ran[j] = t.run(i) == nil
		if err := c.Record(t.ev[2*j+1], s); err != nil {
			return nil, err
		}
	}
	if err := c.EventSync(t.ev[2*len(live)-1]); err != nil {
		return nil, err
	}
	for j := range live {
		ms[j] = math.NaN()
		if ran[j] {
			e, err := c.Elapsed(t.ev[2*j], t.ev[2*j+1])
			if err != nil {
				return nil, err
			}
			ms[j] = float64(e)
		}
	}
	return ms, nil
}

// searchEvents returns n timing events of the context, made on first use.
func (c *Ctx) searchEvents(n int) ([]Event, error) {
	for len(c.lt.events) < n {
		e, err := c.NewEvent(true)
		if err != nil {
			return nil, err
		}
		c.lt.events = append(c.lt.events, e)
	}
	return c.lt.events[:n], nil
}

// cBytes is the extent in bytes of a column-major C [m, n] (n ≥ 1) of
// leading dimension ldc in the element type of ty: what the search saves
// and restores.
func cBytes(ty Types, m, n, ldc int) int { return ty.C.Size() * (ldc*(n-1) + m) }

// searchPlan times p's candidates on cl's operands and keeps the fastest
// in p (see the comment at the top of this file).
func (c *Ctx) searchPlan(key ltKey, p *ltPlan, cl *ltCall, ws Ptr) error {
	as := cl.x.Search
	cands := p.cands
	p.cands, p.searched = nil, true
	n := len(cands)
	if cl.legacy != nil {
		n++
	}
	as.Stats.Descriptors++
	if n < 2 {
		return nil // nothing to choose between
	}
	start := time.Now()
	defer func() { as.Stats.Millis += float64(time.Since(start).Microseconds()) / 1000 }()
	reps := as.reps()
	ev, err := c.searchEvents(2 * n)
	if err != nil {
		return err
	}
	if err := c.StreamSync(cl.s); err != nil {
		return err
	}
	// C is read (beta ≠ 0): keep it, so the timed runs leave it as the
	// call found it. Without the memory for a copy, no search.
	var saved Ptr
	size := cBytes(key.ty, cl.m, cl.n, cl.ldc)
	if cl.beta != 0 {
		if saved, err = c.Malloc(size); err != nil {
			return nil
		}
		if err := c.DtoD(saved, cl.cc, size, cl.s); err != nil {
			c.Free(saved)
			return err
		}
	}
	t := &ltTimer{c: c, p: p, cl: cl, ws: ws, cands: cands, ev: ev}
	best, med, err := pickFastest(n, reps, t)
	if err != nil {
		if saved != 0 {
			c.Free(saved)
		}
		return err
	}
	if saved != 0 {
		err := c.DtoD(cl.cc, saved, size, cl.s)
		if err == nil {
			err = c.StreamSync(cl.s)
		}
		c.Free(saved)
		if err != nil {
			return err
		}
	} else if err := c.StreamSync(cl.s); err != nil {
		return err
	}
	first := 0 // the choice without a search
	if cl.legacy != nil {
		first = len(cands)
	}
	for _, m := range med {
		if math.IsNaN(m) {
			as.Stats.Failed++
		} else {
			as.Stats.Timed++
		}
	}
	switch {
	case best < 0 && cl.legacy != nil:
		p.legacy = true
		return nil
	case best < 0:
		// Nothing ran: refuse the descriptor (the caller falls back).
		p.destroy()
		c.lt.plans[key] = nil
		return ErrNoAlgorithm
	}
	if best != first {
		as.Stats.Changed++
	}
	if !math.IsNaN(med[first]) {
		as.Stats.FirstMs += med[first]
		as.Stats.BestMs += med[best]
	}
	p.legacy = best == len(cands)
	if !p.legacy {
		p.algo = cands[best]
	}
	return nil
}

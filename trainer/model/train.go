package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/internal/atomicfile"
	"github.com/ctrkit/ctrkit/internal/progress"
	"github.com/ctrkit/ctrkit/trainer/input"
	"github.com/ctrkit/ctrkit/trainer/layers"
	"github.com/ctrkit/ctrkit/trainer/metrics"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// TrainStep runs one forward/backward/update on batch b and returns
// nothing: the loss stays on the device until Loss is called. A short
// batch (0 < b.N < BatchSize, the last of an epoch) is padded with empty
// samples that add nothing to the loss or the gradients: the loss and its
// gradient are means over the b.N samples (HugeCTR's current_batchsize).
// BatchNorm's batch statistics still see the padding.
func (m *Model) TrainStep(b *formats.Batch) error {
	if m.Inference() {
		return errInference
	}
	if b.N <= 0 || b.N > m.batch {
		return fmt.Errorf("training batch of %d samples for batch size %d: %w", b.N, m.batch, errShortBatch)
	}
	if err := m.feed.Load(b); err != nil {
		return err
	}
	return m.step(b.N)
}

// eagerStep trains on the n samples of the inputs already loaded (the rest
// is padding), issuing each operation (step, graph.go, may record them as a
// CUDA graph).
func (m *Model) eagerStep(n int) error {
	if m.par != nil {
		m.parLoad(n)
		defer m.parUnload()
	} else if n < m.batch {
		for _, h := range m.heads {
			h.loss.Valid = n
		}
		defer func() {
			for _, h := range m.heads {
				h.loss.Valid = 0
			}
		}()
	}
	m.iter++
	p := layers.Pass{Training: true, Iter: m.iter}
	m.runLabels(p)
	m.prof.mark(spanLabels, 0) // profile.go; a no-op when m.prof is nil
	if err := m.embForward(p); err != nil {
		return err
	}
	for i, l := range m.dense {
		l.Forward(p)
		m.prof.mark(spanDenseFwd, i)
	}
	if m.total != nil {
		m.total.Forward(p)
		m.prof.mark(spanLossSum, 0)
	}
	if m.par != nil {
		if err := m.parAfterForward(); err != nil {
			return err
		}
	}
	for i := len(m.dense) - 1; i >= 0; i-- {
		m.dense[i].Backward(p)
		m.prof.mark(spanDenseBwd, i)
	}
	if m.par != nil {
		// The regularizer's gradient, the same on every rank, is added
		// after the sum: once. The sum reads the weight gradients, so the
		// side stream's (fused.go) join first.
		m.joinGrads()
		if err := m.parBackward(); err != nil {
			return err
		}
	}
	if m.reg != nil {
		m.joinGrads() // the regularizer adds to the weight gradients
		m.reg.AddGrad()
		m.prof.mark(spanReg, 0)
	}
	for i, e := range m.embs {
		e.layer.Backward(p)
		m.prof.mark(spanEmbBwd, i)
	}
	m.joinGrads() // weight gradients on the side stream (fused.go)
	update := func() {
		if !m.frozen {
			m.opt.UpdateEach(m.prof.paramHook())
		} else {
			m.opt.Skip()
		}
		m.prof.mark(spanOptRest, 0)
		for i, e := range m.embs {
			if !e.frozen {
				e.opt.Update()
			} else {
				e.opt.Skip()
			}
			m.prof.mark(spanEmbUpdate, i)
		}
	}
	if m.guard != nil {
		m.guardedUpdate(update) // fp16: a step whose gradients overflow updates nothing
	} else {
		update()
	}
	if !m.frozen {
		m.refreshHalf() // the half operand copies of the updated masters
	}
	return m.be.Err()
}

// Loss downloads the loss of the last forward pass.
func (m *Model) Loss() (float64, error) {
	var v [1]float32
	if m.lossOut.IsZero() {
		return 0, errInference
	}
	if err := m.be.Download(v[:], m.lossOut); err != nil {
		return 0, err
	}
	return float64(v[0]), nil
}

// forward runs inference on b and returns the scores of its b.N samples
// ([n·T], T = PredictionWidth: σ of the logits, or the softmax for
// CrossEntropyLoss, per output), valid until the next call.
func (m *Model) forward(b *formats.Batch, scores []float32) ([]float32, error) {
	out, err := m.forwardLogits(b, scores)
	if err != nil {
		return nil, err
	}
	m.probabilities(out)
	return out, nil
}

// forwardLogits runs inference on b and returns the logits of its b.N
// samples ([n·T]) in scores.
func (m *Model) forwardLogits(b *formats.Batch, scores []float32) ([]float32, error) {
	if err := m.feed.Load(b); err != nil {
		return nil, err
	}
	return m.forwardLoaded(b.N, scores)
}

// forwardLoaded runs inference on the inputs already loaded (n samples)
// and returns their logits ([n·T]) in scores.
func (m *Model) forwardLoaded(n int, scores []float32) ([]float32, error) {
	p := layers.Pass{Training: false, Iter: m.iter}
	if m.par != nil {
		m.parLoad(n)
		defer m.parUnload()
	}
	m.runLabels(p)
	if err := m.embForward(p); err != nil {
		return nil, err
	}
	for _, l := range m.dense {
		l.Forward(p)
	}
	if m.total != nil {
		m.total.Forward(p)
	}
	if err := m.downloadPredictions(scores); err != nil {
		return nil, err
	}
	t := m.predW
	out := scores[:n*t]
	if i := firstNonFinite(out); i >= 0 {
		return nil, &NonFiniteError{What: "prediction", Sample: int64(i / t), Value: float64(out[i])}
	}
	return out, nil
}

// probabilities turns logits [n·T] into scores in place, per output: the
// softmax of each sample for CrossEntropyLoss, σ for the other losses; an
// inference output is already probabilities.
func (m *Model) probabilities(out []float32) {
	T := m.predW
	for _, h := range m.heads {
		t := h.width()
		switch {
		case h.loss == nil:
		case h.loss.Kind == layers.CrossEntropy:
			for i := 0; i+T <= len(out); i += T {
				softmax(out[i+h.off : i+h.off+t])
			}
		default:
			for i := 0; i+T <= len(out); i += T {
				for k := h.off; k < h.off+t; k++ {
					out[i+k] = float32(1 / (1 + math.Exp(-float64(out[i+k]))))
				}
			}
		}
	}
}

// lossSums are, per output, the sum over the first n samples of the
// per-sample loss its loss layer averages (HugeCTR loss.cu, from the
// logits x [n·T]): BCE; for MultiCrossEntropyLoss Σ_t w_t·bce / T over
// the labels not below −0.5 (a masked label adds 0 but counts in T); for
// CrossEntropyLoss −log softmax(x)[label]; for an inference output the BCE
// of its probabilities. Labels y are [n·L].
func (m *Model) lossSums(x, y []float32, n int) ([]float64, error) {
	var ss []float64
	for _, h := range m.heads {
		s, err := m.headLossSum(h, x, y, n)
		if err != nil {
			if len(m.heads) > 1 {
				err = fmt.Errorf("label %s: %w", h.label, err)
			}
			return nil, err
		}
		ss = append(ss, s)
	}
	return ss, nil
}

func (m *Model) headLossSum(h *head, x, y []float32, n int) (float64, error) {
	t, T, off := h.width(), m.predW, h.off
	L, lc := m.feed.LabelDim, h.col
	var s float64
	if h.loss == nil {
		for i := 0; i < n; i++ {
			for k := 0; k < t; k++ {
				s += bceFromProbability(float64(x[i*T+off+k]), float64(y[i*L+lc+k]))
			}
		}
		return s / float64(t), nil
	}
	if h.loss.Kind == layers.CrossEntropy {
		for i := 0; i < n; i++ {
			row, c := x[i*T+off:i*T+off+t], int(y[i*L+lc])
			if c < 0 || c >= t || float32(c) != y[i*L+lc] {
				return 0, fmt.Errorf("sample %d: label %v is not a class index in [0, %d)", i, y[i*L+lc], t)
			}
			mx := row[0]
			for _, v := range row {
				mx = max(mx, v)
			}
			var e float64
			for _, v := range row {
				e += math.Exp(float64(v - mx))
			}
			s += math.Log(e) - float64(row[c]-mx)
		}
		return s, nil
	}
	w, multi := h.g.TargetWeight, h.loss.Kind == layers.MultiCrossEntropy
	for i := 0; i < n; i++ {
		for k := 0; k < t; k++ {
			xv, yv := float64(x[i*T+off+k]), float64(y[i*L+lc+k])
			if multi && yv < -0.5 { // masked (loss.cu MultiCrossEntropy_Kernel)
				continue
			}
			var l float64
			if xv >= 0 {
				l = xv*(1-yv) + math.Log1p(math.Exp(-xv))
			} else {
				l = -xv*yv + math.Log1p(math.Exp(xv))
			}
			if len(w) == t {
				l *= float64(w[k])
			}
			s += l
		}
	}
	return s / float64(t), nil
}

// NonFiniteError reports a NaN or infinite loss or prediction: the model
// diverged (or was loaded diverged).
type NonFiniteError struct {
	What   string // "training loss" or "prediction"
	Iter   int64  // the training iteration (1-based), 0 when not training
	Sample int64  // the sample of a prediction (0-based), −1 for a loss
	Value  float64
}

func (e *NonFiniteError) Error() string {
	var where string
	if e.Iter > 0 {
		where = fmt.Sprintf("iteration %d: ", e.Iter)
	}
	if e.Sample >= 0 && e.What == "prediction" {
		where += fmt.Sprintf("sample %d: ", e.Sample)
	}
	return fmt.Sprintf("%sthe %s is %v: the model diverged (lower the learning rate, --lr, or check the data)", where, e.What, e.Value)
}

// firstNonFinite is the index of the first NaN or ±Inf of x, or −1.
func firstNonFinite(x []float32) int {
	for i, v := range x {
		if v-v != 0 { // NaN − NaN and Inf − Inf are NaN
			return i
		}
	}
	return -1
}

// lossWatchSteps is how many steps' losses stay on the device between two
// checks for NaN and Inf (one download of as many floats a check).
const lossWatchSteps = 32

// lossWatch keeps the losses of the last lossWatchSteps training steps on
// the device, one [1]-element copy a step without synchronising, and
// checks them on the host at display, evaluation and snapshot points, every
// lossWatchSteps steps and at the end, so a diverging run stops at most 32
// steps late and names the first iteration whose loss was NaN or Inf.
type lossWatch struct {
	m    *Model
	ring tensor.Tensor // [1, lossWatchSteps]: loss of iteration i at (i−1) mod K
	host []float32
	from int64 // first iteration not yet checked (0: none recorded)
}

func newLossWatch(m *Model) *lossWatch {
	return &lossWatch{m: m, ring: m.be.Alloc(tensor.Float32, 1, lossWatchSteps), host: make([]float32, lossWatchSteps)}
}

// record keeps the loss of iteration iter (just trained).
func (w *lossWatch) record(iter int64) {
	if w.from == 0 {
		w.from = iter
	}
	w.m.be.CopyCols(w.ring, int((iter-1)%lossWatchSteps), w.m.lossOut.Reshape(1, 1), 0, 1, 0)
}

// due reports whether iteration iter must be checked before the next step
// (its ring slot would be overwritten).
func (w *lossWatch) due(iter int64) bool { return w.from > 0 && iter-w.from+1 >= lossWatchSteps }

// check checks the losses of the iterations up to iter.
func (w *lossWatch) check(iter int64) error {
	if w.from == 0 || iter < w.from {
		return nil
	}
	if err := w.m.be.Download(w.host, w.ring); err != nil {
		return fmt.Errorf("iteration %d: %w", iter, err)
	}
	for it := w.from; it <= iter; it++ {
		if v := w.host[(it-1)%lossWatchSteps]; v-v != 0 {
			return &NonFiniteError{What: "training loss", Iter: it, Sample: -1, Value: float64(v)}
		}
	}
	w.from = iter + 1
	return nil
}

func (w *lossWatch) free() { w.m.be.Free(w.ring) }

func softmax(x []float32) {
	mx := x[0]
	for _, v := range x {
		mx = max(mx, v)
	}
	var s float64
	for i, v := range x {
		e := math.Exp(float64(v - mx))
		x[i] = float32(e)
		s += e
	}
	for i := range x {
		x[i] = float32(float64(x[i]) / s)
	}
}

// EvalResult is the outcome of an evaluation.
type EvalResult struct {
	// AUC is the exact AUC (SPEC §8) of the scores: for CrossEntropyLoss of
	// P(class 1); for MultiCrossEntropyLoss the mean of the labels' AUCs
	// (HugeCTR's multi-class AUC); for a multi-task model the mean over
	// its tasks' AUC columns (HugeCTR prints the per-class AUCs beside it).
	AUC float64
	// Loss is the model's loss (without the regularizer's term) as a mean
	// per sample: Σ weight·loss over the tasks of a multi-task model.
	Loss    float64
	HitRate float64
	Samples int
	Batches int
	// Tasks are the per-task results of a model with several loss layers
	// (in layer order); nil for one.
	Tasks []TaskResult
}

// Evaluate runs the model over up to maxBatches batches of r (0: to the
// end) without training.
func (m *Model) Evaluate(r formats.Reader, maxBatches int) (EvalResult, error) {
	return m.evaluate(r, int64(maxBatches)*int64(m.batch), nil)
}

// EvalSamples is the number of samples HugeCTR evaluates: max_eval_batches
// batches of batchsize_eval (of batchsize when batchsize_eval is 0); 0
// means all. The network runs in batches of its own size whatever
// batchsize_eval is: the metrics depend only on which samples are seen.
func EvalSamples(maxEvalBatches, batchSizeEval, batchSize int) int64 {
	if batchSizeEval <= 0 {
		batchSizeEval = batchSize
	}
	return int64(maxEvalBatches) * int64(batchSizeEval)
}

// EvaluateSamples runs the model over the first maxSamples samples of r (0:
// to the end) without training.
func (m *Model) EvaluateSamples(r formats.Reader, maxSamples int64) (EvalResult, error) {
	return m.evaluate(r, maxSamples, nil)
}

// evaluate is EvaluateSamples; export, when not nil, receives every batch's
// scores and labels of the first AUC column (aucColumn).
func (m *Model) evaluate(r formats.Reader, maxSamples int64, export func(scores, labels []float32) error) (EvalResult, error) {
	return m.evaluateFrom(func() (formats.Reader, error) { return keepOpen{r}, nil }, maxSamples, export, nil)
}

// keepOpen is a reader whose Close leaves it open (the caller's).
type keepOpen struct{ formats.Reader }

func (keepOpen) Close() error { return nil }

// evaluateFrom is evaluate over the batches of cache (nil: none) and then
// those of the reader open returns (opened only when the cache does not
// hold the evaluation; closed at the end).
func (m *Model) evaluateFrom(open func() (formats.Reader, error), maxSamples int64, export func(scores, labels []float32) error, cache *input.EvalCache) (EvalResult, error) {
	var res EvalResult
	var avg metrics.AverageLoss
	var hr metrics.HitRate
	cols := m.aucColumnList()
	aucs := make([]metrics.AUCAccumulator, len(cols))
	taskLoss := make([]metrics.AverageLoss, len(m.heads))
	col := make([]float32, m.batch)
	lab := make([]float32, m.batch)
	err := m.scan(open, maxSamples, cache, func(n int, x, labels []float32) error {
		lss, lerr := m.lossSums(x, labels, n)
		if lerr != nil {
			return fmt.Errorf("evaluation data after %d samples: %w", res.Samples, lerr)
		}
		var ls float64
		for h, s := range lss {
			ls += m.heads[h].weight * s
			taskLoss[h].Add(s/float64(n), n)
		}
		m.probabilities(x)
		for c := range aucs {
			m.aucColumn(col[:n], lab[:n], x, labels, cols[c])
			if c == 0 {
				if export != nil {
					if err := export(col[:n], lab[:n]); err != nil {
						return err
					}
				}
				hr.Add(col[:n], lab[:n])
			}
			aucs[c].Add(col[:n], lab[:n])
		}
		avg.Add(ls/float64(n), n)
		res.Samples += n
		res.Batches++
		return nil
	})
	if err != nil {
		return res, err
	}
	res.Loss, res.HitRate = avg.Value(), hr.Value()
	// HugeCTR's AUC of a multi-label model is the mean of the columns' AUCs.
	if len(m.heads) > 1 {
		res.Tasks = make([]TaskResult, len(m.heads))
		for h, hd := range m.heads {
			res.Tasks[h] = TaskResult{Label: hd.label, Weight: hd.weight, Loss: taskLoss[h].Value()}
		}
	}
	per := make([]int, len(m.heads))
	for _, c := range cols {
		per[c.h]++
	}
	for c := range aucs {
		a, err := m.auc(&aucs[c])
		if err != nil {
			return res, err
		}
		res.AUC += a / float64(len(aucs))
		if res.Tasks != nil {
			res.Tasks[cols[c].h].AUC += a / float64(per[cols[c].h])
		}
	}
	return res, nil
}

// aucColumn writes the scores and labels AUC column c ranks, from the
// batch's probabilities p [n·T] and labels y: the head's column for the
// sigmoid losses and inference outputs; for CrossEntropyLoss P(class 1)
// (1 − P(class 0) with more than two classes) against label ≥ 1 (HugeCTR's
// click = label ≥ 0.5).
func (m *Model) aucColumn(score, label, p, y []float32, c aucCol) {
	h := m.heads[c.h]
	t, T, L := h.width(), m.predW, m.feed.LabelDim
	o, lc := h.off, h.col
	for i := range score {
		if h.loss == nil || h.loss.Kind != layers.CrossEntropy {
			score[i], label[i] = p[i*T+o+c.c], y[i*L+lc+c.c]
			continue
		}
		if t == 2 {
			score[i] = p[i*T+o+1]
		} else {
			score[i] = 1 - p[i*T+o]
		}
		label[i] = 0
		if y[i*L+lc] >= 0.5 {
			label[i] = 1
		}
	}
}

// deviceAUCMin is the eval size from which the AUC is computed by the
// backend (on the GPU: a device radix sort) instead of the host's sort.
const deviceAUCMin = 1 << 16

// auc is the exact AUC of the accumulated scores: on a device backend
// (tensor.DeviceMemory, the GPU) by its AUC operation (bit-identical to
// the host's for 0/1 labels), else on the host.
func (m *Model) auc(a *metrics.AUCAccumulator) (float64, error) {
	s, l := a.Data()
	if _, ok := m.be.(tensor.DeviceMemory); !ok || len(s) < deviceAUCMin {
		return a.Value(), nil
	}
	ts, tl := m.be.Alloc(tensor.Float32, len(s)), m.be.Alloc(tensor.Float32, len(l))
	defer m.be.Free(ts)
	defer m.be.Free(tl)
	m.be.Upload(ts, s)
	m.be.Upload(tl, l)
	return m.be.AUC(ts, tl)
}

// atSample moves a NonFiniteError's sample index from the batch to the
// data (the batch starts at sample first).
func atSample(err error, first int64) error {
	var nf *NonFiniteError
	if errors.As(err, &nf) && nf.Sample >= 0 {
		nf.Sample += first
	}
	return err
}

// Predict appends the scores of up to maxBatches batches of r (0: all) to
// dst, T per sample (T = the prediction width, 1 for BCE).
func (m *Model) Predict(dst []float32, r formats.Reader, maxBatches int) ([]float32, error) {
	return m.PredictSamples(dst, r, int64(maxBatches)*int64(m.batch))
}

// PredictSamples is Predict over the first maxSamples samples (0: all).
func (m *Model) PredictSamples(dst []float32, r formats.Reader, maxSamples int64) ([]float32, error) {
	t := m.predW
	err := m.scan(func() (formats.Reader, error) { return keepOpen{r}, nil }, maxSamples, nil, func(n int, x, _ []float32) error {
		m.probabilities(x)
		dst = append(dst, x[:n*t]...)
		return nil
	})
	return dst, err
}

// scan runs inference over the first maxSamples samples (0: all): the
// batches of cache (nil: none), then those of the reader open returns,
// through the input pipeline (m.evalPf, or one of its own), and calls fn
// with each batch's sample count n, logits [n·T] (valid until fn returns;
// fn may overwrite them) and labels [n·L]. A batch of the reader is added
// to cache when it has room.
func (m *Model) scan(open func() (formats.Reader, error), maxSamples int64, cache *input.EvalCache, fn func(n int, x, labels []float32) error) error {
	f := m.feed
	scores := make([]float32, m.batch*m.predW)
	labels := make([]float32, m.batch*f.LabelDim)
	var seen int64
	more := func() bool { return maxSamples <= 0 || seen < maxSamples }
	run := func(n int) error {
		if maxSamples > 0 {
			n = int(min(int64(n), maxSamples-seen))
		}
		x, err := m.forwardLoaded(n, scores)
		if err != nil {
			return atSample(err, seen)
		}
		if err := m.be.Download(labels, f.Label.Value); err != nil {
			return err
		}
		if err := fn(n, x, labels[:n*f.LabelDim]); err != nil {
			return err
		}
		seen += int64(n)
		m.bar.Add(int64(n))
		return nil
	}
	pos := 0 // batches seen
	if cache != nil {
		for ; pos < cache.Len() && more(); pos++ {
			n, err := cache.Replay(f, pos)
			if err != nil {
				return err
			}
			if err := run(n); err != nil {
				return err
			}
		}
		if cache.Complete || !more() {
			return nil
		}
	}
	r, err := open()
	if err != nil {
		return err
	}
	defer r.Close()
	pf := m.evalPf
	if pf == nil {
		pf = input.NewPrefetcher(m.feed)
		defer pf.Close()
	}
	if err := pf.Start(r); err != nil {
		return err
	}
	defer pf.Stop()
	for skip := pos; more(); {
		st := pf.Next()
		if st.Err != nil && st.Err != io.EOF {
			pf.Release(st)
			return st.Err
		}
		switch {
		case st.N == 0:
			pf.Release(st)
		case skip > 0: // cached
			skip--
			pf.Release(st)
		default:
			if err := pf.Commit(st); err != nil {
				return err
			}
			if cache != nil && pos == cache.Len() {
				if err := cache.Add(f, st.N); err != nil {
					return err
				}
			}
			pos++
			if err := run(st.N); err != nil {
				return err
			}
		}
		if st.Err == io.EOF {
			if cache != nil && pos == cache.Len() {
				cache.Complete = true
			}
			break
		}
	}
	return nil
}

// FitOptions are HugeCTR's fit() arguments plus where data and output go.
type FitOptions struct {
	// OpenTrain opens the training data (again for each epoch, or when a
	// repeating reader ends).
	OpenTrain func() (formats.Reader, error)
	// OpenEval opens the evaluation data for each evaluation; nil: none.
	OpenEval func() (formats.Reader, error)
	// CacheEvalBatches keeps the first CacheEvalBatches evaluation batches
	// on the backend after the first evaluation reads them (HugeCTR's
	// cache_eval_data): later evaluations run on them without opening
	// OpenEval's data again, and read only the batches past them.
	CacheEvalBatches int
	// NumEpochs > 0 selects epoch mode; else training runs until the
	// iteration count reaches MaxIter, counting the model's iterations
	// so far (Model.Iter: those of a loaded snapshot or earlier calls).
	NumEpochs int
	MaxIter   int
	// DropIncomplete is HugeCTR's drop_incomplete_batch (Python
	// CreateSolver): true skips training batches shorter than the batch
	// size, false trains them, also a repeating reader's short last batch
	// of each pass (HugeCTR Model::read_a_batch). nil: epoch mode trains
	// the short last batch, max_iter mode skips it.
	DropIncomplete *bool
	// Display, EvalInterval, Snapshot are in iterations (0: never;
	// epoch mode also evaluates at the end of each epoch).
	Display        int
	EvalInterval   int
	Snapshot       int
	SnapshotPrefix string
	// KeepSnapshots keeps the newest K snapshots of SnapshotPrefix,
	// deleting older ones after each save (0: all, as HugeCTR).
	KeepSnapshots  int
	MaxEvalBatches int
	// EvalBatchSize is batchsize_eval: evaluations cover MaxEvalBatches ×
	// EvalBatchSize samples (0: the network's batch size).
	EvalBatchSize int
	// ExportPredictionsPrefix, when set, writes each evaluation's scores
	// and labels (the first AUC column: P(class 1) for CrossEntropyLoss) to
	// <prefix>_pred_<iter> and <prefix>_label_<iter>, one %.9g value per
	// line (HugeCTR export_predictions_prefix).
	ExportPredictionsPrefix string
	// AUCThreshold stops training once an evaluation reaches it (0: never).
	AUCThreshold float64
	// EvalMetrics selects the metrics of the eval lines and further
	// thresholds (eval_metrics); AUCThreshold, when set, overrides its AUC.
	EvalMetrics MetricSpec
	// Log receives the display and eval lines; Metrics one JSON object
	// per line (nil: none).
	Log, Metrics io.Writer
	// Progress, when a terminal, shows a bar of the iterations with the
	// time left (max_iter mode; epoch mode counts iterations only). Log
	// lines written to the same terminal clear it first.
	Progress io.Writer
}

// dropShort says whether training skips batches shorter than the batch
// size (DropIncomplete, else in max_iter mode only).
func (o *FitOptions) dropShort() bool {
	if o.DropIncomplete != nil {
		return *o.DropIncomplete
	}
	return o.NumEpochs <= 0
}

// Validate reports invalid options.
func (o *FitOptions) Validate() error {
	if o.OpenTrain == nil {
		return errors.New("FitOptions.OpenTrain is nil")
	}
	if o.CacheEvalBatches < 0 {
		return errors.New("FitOptions.CacheEvalBatches < 0")
	}
	if o.NumEpochs <= 0 && o.MaxIter <= 0 {
		return errors.New("give NumEpochs or MaxIter")
	}
	if o.Display < 0 || o.EvalInterval < 0 || o.Snapshot < 0 || o.MaxEvalBatches < 0 || o.KeepSnapshots < 0 {
		return errors.New("negative interval")
	}
	return nil
}

// Point is one logged measurement.
type Point struct {
	Iter          int64    `json:"iter"`
	Epoch         int      `json:"epoch,omitempty"`
	Loss          *float64 `json:"loss,omitempty"`
	LR            *float64 `json:"lr,omitempty"`
	SamplesPerSec *float64 `json:"samples_per_sec,omitempty"`
	EvalAUC       *float64 `json:"eval_auc,omitempty"`
	EvalLoss      *float64 `json:"eval_loss,omitempty"`
	EvalSamples   int      `json:"eval_samples,omitempty"`
	// EvalTasks are the per-task AUCs and losses of a multi-task model.
	EvalTasks []TaskPoint `json:"eval_tasks,omitempty"`
}

// TaskPoint is one task's evaluation in a Point (null: not a number).
type TaskPoint struct {
	Label string   `json:"label"`
	AUC   *float64 `json:"auc"`
	Loss  *float64 `json:"loss"`
}

// taskPoints are r's tasks for a Point or JSON output.
func taskPoints(r EvalResult) []TaskPoint {
	num := func(v float64) *float64 {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return &v
	}
	var ps []TaskPoint
	for _, t := range r.Tasks {
		ps = append(ps, TaskPoint{Label: t.Label, AUC: num(t.AUC), Loss: num(t.Loss)})
	}
	return ps
}

// TaskPoints are the per-task results of r with NaN as nil (JSON).
func (r EvalResult) TaskPoints() []TaskPoint { return taskPoints(r) }

// FitResult is what Fit did.
type FitResult struct {
	// Iters is the iteration count reached; First the count Fit started
	// from (a loaded snapshot's iteration, else 0): MaxIter counts from 0,
	// so a resumed run ends where the interrupted one would have.
	Iters int64
	First int64
	// Samples is the number of samples trained on (by this Fit);
	// EpochSamples that of each finished epoch (epoch mode), the short last
	// batch included.
	Samples      int64
	EpochSamples []int64
	LastAUC      float64 // NaN when never evaluated
	History      []Point
	Stopped      bool // the AUC threshold was reached
	// Skipped is the number of steps fp16's overflow check skipped since
	// the model was built (0 in other precisions).
	Skipped int64
}

// Fit trains (HugeCTR Model.fit).
func (m *Model) Fit(ctx context.Context, o FitOptions) (FitResult, error) {
	res := FitResult{LastAUC: math.NaN(), Iters: m.Iter(), First: m.Iter()}
	if err := o.Validate(); err != nil {
		return res, err
	}
	if m.Inference() {
		return res, errInference
	}
	if m.guard != nil {
		m.guard.readIter = res.First // the skipped count is read from here on
	}
	if o.NumEpochs <= 0 && res.First >= int64(o.MaxIter) {
		return res, fmt.Errorf("nothing to train: the model is at iteration %d and max_iter is %d (iterations count from 0, a loaded snapshot's included)", res.First, o.MaxIter)
	}
	if m.Rank() != 0 {
		// One rank of a group (Parallel): rank 0 reports for all.
		o.Log, o.Metrics, o.Progress, o.ExportPredictionsPrefix = nil, nil, nil, ""
	}
	logw := o.Log
	if logw == nil {
		logw = io.Discard
	}
	barTotal := int64(-1)
	if o.NumEpochs <= 0 {
		barTotal = int64(o.MaxIter) - res.First
	}
	bar := progress.New(o.Progress, barTotal, "training", "iters")
	defer bar.Finish()
	logw = bar.Writer(logw)
	var enc *json.Encoder
	if o.Metrics != nil {
		enc = json.NewEncoder(o.Metrics)
	}
	record := func(p Point) error {
		res.History = append(res.History, p)
		if enc != nil {
			return enc.Encode(p)
		}
		return nil
	}
	if o.Snapshot > 0 {
		if err := m.CheckSave(o.SnapshotPrefix); err != nil {
			return res, err
		}
	}
	// One pipeline reads pass after pass: it opens the next while the
	// last batches of a pass train (no drain at an epoch's end).
	pf := input.NewPrefetcher(m.feed)
	pf.DropShort(o.dropShort())
	if err := pf.StartPasses(o.OpenTrain, max(o.NumEpochs, 0)); err != nil {
		return res, err
	}
	defer pf.Close()
	start, lastIter := time.Now(), res.First
	epoch := 0
	var epochSamples int64 // samples trained in this epoch
	var passSamples int64  // samples read since the data was (re)opened
	lastBatch := 0         // samples of the last batch trained
	watch := newLossWatch(m)
	defer watch.free()
	// One evaluation pipeline for the run, and the cached eval batches.
	m.evalPf = input.NewPrefetcher(m.feed)
	defer func() {
		m.evalPf.Close()
		m.evalPf = nil
	}()
	var cache *input.EvalCache
	if o.CacheEvalBatches > 0 && o.OpenEval != nil {
		cache = input.NewEvalCache(o.CacheEvalBatches)
		defer cache.Free(m.be)
	}
	noted := false
	evaluate := func() (bool, error) {
		if o.OpenEval == nil {
			return false, nil
		}
		if err := watch.check(res.Iters); err != nil {
			return false, err
		}
		if err := m.checkGuard(logw, res.Iters); err != nil {
			return false, err
		}
		var export func(s, l []float32) error
		var pred, lab []byte
		if o.ExportPredictionsPrefix != "" {
			export = func(s, l []float32) error {
				for i := range s {
					pred = strconv.AppendFloat(pred, float64(s[i]), 'g', 9, 32)
					pred = append(pred, '\n')
					lab = strconv.AppendFloat(lab, float64(l[i]), 'g', 9, 32)
					lab = append(lab, '\n')
				}
				return nil
			}
		}
		ev, err := m.evaluateFrom(o.OpenEval, EvalSamples(o.MaxEvalBatches, o.EvalBatchSize, m.batch), export, cache)
		if err != nil {
			return false, fmt.Errorf("evaluation at iteration %d: %w", res.Iters, err)
		}
		if note := cacheNote(cache); note != "" && !noted {
			fmt.Fprintln(logw, note)
			noted = true
		}
		if export != nil {
			p := fmt.Sprintf("%s_pred_%d", o.ExportPredictionsPrefix, res.Iters)
			l := fmt.Sprintf("%s_label_%d", o.ExportPredictionsPrefix, res.Iters)
			if err := atomicfile.WriteFile(p, pred); err != nil {
				return false, err
			}
			if err := atomicfile.WriteFile(l, lab); err != nil {
				return false, err
			}
		}
		res.LastAUC = ev.AUC
		auc, l := ev.AUC, ev.Loss
		if err := record(Point{Iter: res.Iters, Epoch: epoch, EvalAUC: &auc, EvalLoss: &l, EvalSamples: ev.Samples, EvalTasks: taskPoints(ev)}); err != nil {
			return false, err
		}
		ms := o.EvalMetrics
		if o.AUCThreshold > 0 {
			ms.AUC = o.AUCThreshold
		}
		if ms.report(logw, res.Iters, ev) {
			res.Stopped = true
			return true, nil
		}
		return false, nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		if o.NumEpochs <= 0 && res.Iters >= int64(o.MaxIter) {
			break
		}
		st := pf.Next()
		n, rerr := st.N, st.Err
		passSamples += int64(n)
		if rerr != nil && rerr != io.EOF {
			pf.Release(st)
			return res, rerr
		}
		// Epoch mode trains the short last batch (HugeCTR does); a repeating
		// reader (max_iter mode) trains full batches only; DropIncomplete
		// decides when set.
		if n == 0 || (n != m.batch && o.dropShort()) {
			pf.Release(st)
		} else {
			lr := m.LR()
			if err := pf.Commit(st); err != nil {
				return res, fmt.Errorf("iteration %d: %w", res.Iters+1, err)
			}
			err := m.step(n)
			m.reportGraph(logw) // graph.go
			if err != nil {
				return res, fmt.Errorf("iteration %d: %w", res.Iters+1, err)
			}
			res.Iters++
			bar.Add(1)
			res.Samples += int64(n)
			epochSamples += int64(n)
			lastBatch = n
			watch.record(res.Iters)
			display := o.Display > 0 && res.Iters%int64(o.Display) == 0
			if display || watch.due(res.Iters) || (o.Snapshot > 0 && res.Iters%int64(o.Snapshot) == 0) {
				if err := watch.check(res.Iters); err != nil {
					return res, err
				}
				if err := m.checkGuard(logw, res.Iters); err != nil { // fp16's skipped steps
					return res, err
				}
			}
			if display {
				loss, err := m.Loss()
				if err != nil {
					return res, err
				}
				el := time.Since(start).Seconds()
				sps := float64((res.Iters-lastIter)*int64(m.batch)) / max(el, 1e-9)
				fmt.Fprintf(logw, "iter %d: loss %.6f, lr %.6g, %.0f samples/s\n", res.Iters, loss, lr, sps)
				if err := record(Point{Iter: res.Iters, Epoch: epoch, Loss: &loss, LR: &lr, SamplesPerSec: &sps}); err != nil {
					return res, err
				}
				start, lastIter = time.Now(), res.Iters
			}
			if o.EvalInterval > 0 && res.Iters%int64(o.EvalInterval) == 0 {
				if stop, err := evaluate(); err != nil || stop {
					return res, err
				}
			}
			if o.Snapshot > 0 && res.Iters%int64(o.Snapshot) == 0 {
				if err := m.Save(o.SnapshotPrefix, res.Iters); err != nil {
					return res, err
				}
				if m.Rank() == 0 {
					if err := m.PruneSnapshots(o.SnapshotPrefix, o.KeepSnapshots); err != nil {
						return res, err
					}
				}
				fmt.Fprintf(logw, "saved snapshot %s at iter %d\n", o.SnapshotPrefix, res.Iters)
			}
		}
		if rerr == io.EOF {
			epoch++
			if epoch == 1 && passSamples == 0 {
				return res, errors.New("the training data holds no samples")
			}
			if epoch == 1 && o.NumEpochs > 0 && passSamples < int64(m.batch) {
				fmt.Fprintf(logw, "note: the training data holds %d %s, less than one batch of %d: each epoch trains one short batch (--batchsize sets the batch size)\n",
					passSamples, plural(passSamples, "sample", "samples"), m.batch)
			}
			if o.NumEpochs > 0 {
				fmt.Fprintf(logw, "epoch %d done at iter %d: %d %s", epoch, res.Iters, epochSamples, plural(epochSamples, "sample", "samples"))
				if lastBatch != m.batch {
					fmt.Fprintf(logw, " (last batch %d of %d)", lastBatch, m.batch)
				}
				fmt.Fprintln(logw)
				res.EpochSamples = append(res.EpochSamples, epochSamples)
				epochSamples = 0
				if o.EvalInterval == 0 || res.Iters%int64(o.EvalInterval) != 0 {
					if stop, err := evaluate(); err != nil || stop {
						return res, err
					}
				}
				if epoch >= o.NumEpochs {
					break
				}
			}
			if err := watch.check(res.Iters); err != nil {
				return res, err
			}
			if epoch > 0 && res.Iters == res.First && passSamples < int64(m.batch) && o.dropShort() {
				if o.DropIncomplete != nil {
					return res, fmt.Errorf("the training data holds %d %s, less than one batch of %d, and drop_incomplete_batch skips short batches: "+
						"give --batchsize %d or less, or --drop-incomplete-batch=false",
						passSamples, plural(passSamples, "sample", "samples"), m.batch, passSamples)
				}
				return res, fmt.Errorf("the training data holds %d %s, less than one batch of %d, and max_iter mode trains full batches only: "+
					"give --batchsize %d or less, or train in epoch mode (--num-epochs), which trains the short batch",
					passSamples, plural(passSamples, "sample", "samples"), m.batch, passSamples)
			}
			passSamples = 0
		}
	}
	if err := watch.check(res.Iters); err != nil {
		return res, err
	}
	if err := m.checkGuard(logw, res.Iters); err != nil {
		return res, err
	}
	var err error
	res.Skipped, err = m.SkippedSteps()
	return res, err
}

// plural is one when n is 1, else many.
func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

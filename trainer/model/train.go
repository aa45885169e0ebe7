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
	"github.com/ctrkit/ctrkit/trainer/layers"
	"github.com/ctrkit/ctrkit/trainer/metrics"
	"github.com/ctrkit/ctrkit/trainer/tensor"
	"github.com/ctrkit/ctrkit/trainer/tensor/gpu"
)

// TrainStep runs one forward/backward/update on batch b (which must be
// full: b.N == BatchSize) and returns nothing: the loss stays on the device
// until Loss is called.
func (m *Model) TrainStep(b *formats.Batch) error {
	if b.N != m.batch {
		return fmt.Errorf("ctrkit/trainer/model: training batch of %d samples, want %d: %w", b.N, m.batch, errShortBatch)
	}
	if err := m.feed.load(b); err != nil {
		return err
	}
	return m.step()
}

// step trains on the inputs already loaded.
func (m *Model) step() error {
	m.iter++
	p := layers.Pass{Training: true, Iter: m.iter}
	for _, e := range m.embs {
		e.layer.Forward(p)
	}
	for _, l := range m.dense {
		l.Forward(p)
	}
	for i := len(m.dense) - 1; i >= 0; i-- {
		m.dense[i].Backward(p)
	}
	if m.reg != nil {
		m.reg.AddGrad()
	}
	for _, e := range m.embs {
		e.layer.Backward(p)
	}
	if !m.frozen {
		m.opt.Update()
	}
	for _, e := range m.embs {
		if !e.frozen {
			e.opt.Update()
		}
	}
	return m.be.Err()
}

// Loss downloads the loss of the last forward pass.
func (m *Model) Loss() (float64, error) {
	var v [1]float32
	if err := m.be.Download(v[:], m.loss.Outputs()[0].Value); err != nil {
		return 0, err
	}
	return float64(v[0]), nil
}

// forward runs inference on b and returns the scores of its b.N samples
// ([n·T], σ of the logits), valid until the next call.
func (m *Model) forward(b *formats.Batch, scores []float32) ([]float32, error) {
	if err := m.feed.load(b); err != nil {
		return nil, err
	}
	p := layers.Pass{Training: false, Iter: m.iter}
	for _, e := range m.embs {
		e.layer.Forward(p)
	}
	for _, l := range m.dense {
		l.Forward(p)
	}
	if err := m.be.Download(scores, m.pred.Value); err != nil {
		return nil, err
	}
	t := m.pred.Value.Cols()
	out := scores[:b.N*t]
	if m.loss.Kind == layers.CrossEntropy {
		for i := 0; i < b.N; i++ {
			softmax(out[i*t : i*t+t])
		}
		return out, nil
	}
	for i, x := range out {
		out[i] = float32(1 / (1 + math.Exp(-float64(x))))
	}
	return out, nil
}

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
	AUC     float64 // exact AUC of the first label column (SPEC §8)
	Loss    float64 // mean loss per sample
	HitRate float64
	Samples int
	Batches int
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
// scores and labels of the first label column.
func (m *Model) evaluate(r formats.Reader, maxSamples int64, export func(scores, labels []float32) error) (EvalResult, error) {
	var res EvalResult
	var auc metrics.AUCAccumulator
	var avg metrics.AverageLoss
	var hr metrics.HitRate
	b, err := formats.NewBatch(r.Schema(), m.batch, nil)
	if err != nil {
		return res, err
	}
	defer b.Free()
	t := m.pred.Value.Cols()
	scores := make([]float32, m.pred.Value.Len())
	col0 := make([]float32, m.batch)
	lab0 := make([]float32, m.batch)
	for maxSamples <= 0 || int64(res.Samples) < maxSamples {
		n, err := r.Read(b)
		if maxSamples > 0 {
			n = int(min(int64(n), maxSamples-int64(res.Samples)))
		}
		if n > 0 {
			s, ferr := m.forward(b, scores)
			if ferr != nil {
				return res, ferr
			}
			L := b.Schema.LabelDim
			for i := 0; i < n; i++ {
				col0[i], lab0[i] = s[i*t], b.Labels[i*L]
			}
			if export != nil {
				if err := export(col0[:n], lab0[:n]); err != nil {
					return res, err
				}
			}
			auc.Add(col0[:n], lab0[:n])
			hr.Add(col0[:n], lab0[:n])
			avg.Add(bceMean(s, b.Labels[:n*L], n, t, L), n)
			res.Samples += n
			res.Batches++
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return res, err
		}
	}
	res.Loss, res.HitRate = avg.Value(), hr.Value()
	if res.AUC, err = m.auc(&auc); err != nil {
		return res, err
	}
	return res, nil
}

// deviceAUCMin is the eval size from which the AUC is computed by the
// backend (on the GPU: a device radix sort) instead of the host's sort.
const deviceAUCMin = 1 << 16

// auc is the exact AUC of the accumulated scores: on a GPU backend by its
// AUC operation (bit-identical to the host's for 0/1 labels), else on the
// host.
func (m *Model) auc(a *metrics.AUCAccumulator) (float64, error) {
	s, l := a.Data()
	if _, ok := m.be.(*gpu.Backend); !ok || len(s) < deviceAUCMin {
		return a.Value(), nil
	}
	ts, tl := m.be.Alloc(tensor.Float32, len(s)), m.be.Alloc(tensor.Float32, len(l))
	defer m.be.Free(ts)
	defer m.be.Free(tl)
	m.be.Upload(ts, s)
	m.be.Upload(tl, l)
	return m.be.AUC(ts, tl)
}

// bceMean is the mean binary cross-entropy of probabilities against labels
// (the evaluation loss, computed on the host from the downloaded scores).
func bceMean(p, y []float32, n, t, l int) float64 {
	if t != l {
		return math.NaN()
	}
	var s float64
	for i := 0; i < n*t; i++ {
		q := min(max(float64(p[i]), 1e-12), 1-1e-12)
		s -= float64(y[i])*math.Log(q) + (1-float64(y[i]))*math.Log(1-q)
	}
	return s / float64(n)
}

// Predict appends the scores of up to maxBatches batches of r (0: all) to
// dst, T per sample (T = the prediction width, 1 for BCE).
func (m *Model) Predict(dst []float32, r formats.Reader, maxBatches int) ([]float32, error) {
	return m.PredictSamples(dst, r, int64(maxBatches)*int64(m.batch))
}

// PredictSamples is Predict over the first maxSamples samples (0: all).
func (m *Model) PredictSamples(dst []float32, r formats.Reader, maxSamples int64) ([]float32, error) {
	b, err := formats.NewBatch(r.Schema(), m.batch, nil)
	if err != nil {
		return dst, err
	}
	defer b.Free()
	scores := make([]float32, m.pred.Value.Len())
	t := m.pred.Value.Cols()
	for seen := int64(0); maxSamples <= 0 || seen < maxSamples; {
		n, err := r.Read(b)
		if maxSamples > 0 {
			n = int(min(int64(n), maxSamples-seen))
		}
		if n > 0 {
			s, ferr := m.forward(b, scores)
			if ferr != nil {
				return dst, ferr
			}
			dst = append(dst, s[:n*t]...)
			seen += int64(n)
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
	return dst, nil
}

// FitOptions are HugeCTR's fit() arguments plus where data and output go.
type FitOptions struct {
	// OpenTrain opens the training data (again for each epoch, or when a
	// repeating reader ends).
	OpenTrain func() (formats.Reader, error)
	// OpenEval opens the evaluation data for each evaluation; nil: none.
	OpenEval func() (formats.Reader, error)
	// NumEpochs > 0 selects epoch mode; else MaxIter iterations.
	NumEpochs int
	MaxIter   int
	// Display, EvalInterval, Snapshot are in iterations (0: never;
	// epoch mode also evaluates at the end of each epoch).
	Display        int
	EvalInterval   int
	Snapshot       int
	SnapshotPrefix string
	MaxEvalBatches int
	// EvalBatchSize is batchsize_eval: evaluations cover MaxEvalBatches ×
	// EvalBatchSize samples (0: the network's batch size).
	EvalBatchSize int
	// ExportPredictionsPrefix, when set, writes each evaluation's scores
	// and labels (first label column) to <prefix>_pred_<iter> and
	// <prefix>_label_<iter>, one %.9g value per line (HugeCTR
	// export_predictions_prefix).
	ExportPredictionsPrefix string
	// AUCThreshold stops training once an evaluation reaches it (0: never).
	AUCThreshold float64
	// EvalMetrics selects the metrics of the eval lines and further
	// thresholds (eval_metrics); AUCThreshold, when set, overrides its AUC.
	EvalMetrics MetricSpec
	// Log receives the display and eval lines; Metrics one JSON object
	// per line (nil: none).
	Log, Metrics io.Writer
}

// Validate reports invalid options.
func (o *FitOptions) Validate() error {
	if o.OpenTrain == nil {
		return errors.New("ctrkit/trainer/model: FitOptions.OpenTrain is nil")
	}
	if o.NumEpochs <= 0 && o.MaxIter <= 0 {
		return errors.New("ctrkit/trainer/model: give NumEpochs or MaxIter")
	}
	if o.Display < 0 || o.EvalInterval < 0 || o.Snapshot < 0 || o.MaxEvalBatches < 0 {
		return errors.New("ctrkit/trainer/model: negative interval")
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
}

// FitResult is what Fit did.
type FitResult struct {
	Iters   int64
	LastAUC float64 // NaN when never evaluated
	History []Point
	Stopped bool // the AUC threshold was reached
}

// Fit trains (HugeCTR Model.fit).
func (m *Model) Fit(ctx context.Context, o FitOptions) (FitResult, error) {
	res := FitResult{LastAUC: math.NaN()}
	if err := o.Validate(); err != nil {
		return res, err
	}
	logw := o.Log
	if logw == nil {
		logw = io.Discard
	}
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
	r, err := o.OpenTrain()
	if err != nil {
		return res, err
	}
	defer func() {
		if r != nil {
			r.Close()
		}
	}()
	pf, err := m.newPrefetcher(r)
	if err != nil {
		return res, err
	}
	defer func() { pf.close() }()
	start, lastIter := time.Now(), int64(0)
	epoch := 0
	evaluate := func() (bool, error) {
		if o.OpenEval == nil {
			return false, nil
		}
		er, err := o.OpenEval()
		if err != nil {
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
		ev, err := m.evaluate(er, EvalSamples(o.MaxEvalBatches, o.EvalBatchSize, m.batch), export)
		er.Close()
		if err != nil {
			return false, err
		}
		if export != nil {
			p := fmt.Sprintf("%s_pred_%d", o.ExportPredictionsPrefix, res.Iters)
			l := fmt.Sprintf("%s_label_%d", o.ExportPredictionsPrefix, res.Iters)
			if err := formats.WriteFileAtomic(p, pred); err != nil {
				return false, err
			}
			if err := formats.WriteFileAtomic(l, lab); err != nil {
				return false, err
			}
		}
		res.LastAUC = ev.AUC
		auc, l := ev.AUC, ev.Loss
		if err := record(Point{Iter: res.Iters, Epoch: epoch, EvalAUC: &auc, EvalLoss: &l, EvalSamples: ev.Samples}); err != nil {
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
		st := pf.next()
		n, rerr := st.n, st.err
		if rerr != nil && rerr != io.EOF {
			pf.release(st)
			return res, rerr
		}
		if n != m.batch {
			pf.release(st)
		} else {
			lr := m.LR()
			if err := pf.commit(st); err != nil {
				return res, fmt.Errorf("iteration %d: %w", res.Iters+1, err)
			}
			if err := m.step(); err != nil {
				return res, fmt.Errorf("iteration %d: %w", res.Iters+1, err)
			}
			res.Iters++
			if o.Display > 0 && res.Iters%int64(o.Display) == 0 {
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
				fmt.Fprintf(logw, "saved snapshot %s at iter %d\n", o.SnapshotPrefix, res.Iters)
			}
		}
		if rerr == io.EOF {
			pf.close()
			r.Close()
			r = nil
			epoch++
			if o.NumEpochs > 0 {
				fmt.Fprintf(logw, "epoch %d done at iter %d\n", epoch, res.Iters)
				if o.EvalInterval == 0 || res.Iters%int64(o.EvalInterval) != 0 {
					if stop, err := evaluate(); err != nil || stop {
						return res, err
					}
				}
				if epoch >= o.NumEpochs {
					break
				}
			}
			if r, err = o.OpenTrain(); err != nil {
				return res, err
			}
			if pf, err = m.newPrefetcher(r); err != nil {
				return res, err
			}
			if epoch > 0 && res.Iters == 0 && n < m.batch && o.NumEpochs <= 0 {
				return res, fmt.Errorf("ctrkit/trainer/model: the training data holds less than one batch of %d", m.batch)
			}
		}
	}
	return res, nil
}

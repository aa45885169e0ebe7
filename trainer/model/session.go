package model

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/internal/atomicfile"
	"github.com/ctrkit/ctrkit/trainer/optim"
)

// SessionLoader builds the job of a session's "load" request from its
// arguments (ctrkit train's flags).
type SessionLoader func(args []string) (Job, error)

// SessionRequest is one line of the session protocol (docs/SESSION.md).
type SessionRequest struct {
	Cmd string `json:"cmd"`
	// load
	Args   []string `json:"args,omitempty"`
	Repeat *bool    `json:"repeat,omitempty"`
	// set_source
	Source     *string `json:"source,omitempty"`
	EvalSource *string `json:"eval_source,omitempty"`
	// eval
	Batches int `json:"batches,omitempty"`
	// set_lr, reset_lr
	LR          *float64 `json:"lr,omitempty"`
	WarmupSteps *int64   `json:"warmup_steps,omitempty"`
	DecayStart  *int64   `json:"decay_start,omitempty"`
	DecaySteps  *int64   `json:"decay_steps,omitempty"`
	DecayPower  *float64 `json:"decay_power,omitempty"`
	EndLR       *float64 `json:"end_lr,omitempty"`
	// save, predict, export_predictions, load_*
	Prefix   string            `json:"prefix,omitempty"`
	Iter     int64             `json:"iter,omitempty"`
	Output   string            `json:"output,omitempty"`
	Labels   string            `json:"labels,omitempty"`
	File     string            `json:"file,omitempty"`
	Files    []string          `json:"files,omitempty"`
	FilesMap map[string]string `json:"files_map,omitempty"`
	OptFiles []string          `json:"opt_files,omitempty"`
	// freeze_embedding, unfreeze_embedding ("" all)
	Name string `json:"name,omitempty"`
}

// session is the state of one ctrkit session: the job, its model, the
// training reader (one batch read ahead, so is_eof is known) and the
// learning-rate scheduler get_next advances.
type session struct {
	load   SessionLoader
	job    Job
	m      *Model
	repeat bool

	train        formats.Reader
	cur, next    *formats.Batch
	nextN        int
	nextErr      error
	eof          bool // the training reader has no batch left
	passSamples  int64
	trainedSteps int64

	sched  optim.Schedule
	lrStep int64

	lastScores, lastLabels []float32
}

// ServeSession runs the session protocol (docs/SESSION.md): one JSON
// request per line of in, one JSON response per line of out, until "quit"
// or the end of in. A request that fails gets {"ok":false,"error":…} and
// the session goes on.
func ServeSession(ctx context.Context, in io.Reader, out io.Writer, load SessionLoader) error {
	s := &session{load: load, repeat: true}
	defer s.close()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	enc := json.NewEncoder(out)
	line := 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		var req SessionRequest
		var resp map[string]any
		var err error
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if derr := dec.Decode(&req); derr != nil {
			err = fmt.Errorf("request line %d: %v", line, derr)
		} else {
			resp, err = s.do(ctx, &req)
		}
		if resp == nil {
			resp = map[string]any{}
		}
		if err != nil {
			resp = map[string]any{"ok": false, "error": err.Error()}
		} else {
			resp["ok"] = true
		}
		for k, v := range resp {
			if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
				resp[k] = nil // JSON has no NaN: null (e.g. a hit rate of no positive sample)
			}
		}
		if werr := enc.Encode(resp); werr != nil {
			return werr
		}
		if err == nil && req.Cmd == "quit" {
			return nil
		}
	}
	return sc.Err()
}

func (s *session) close() {
	s.closeTrain()
	if s.job.Backend != nil {
		CloseBackend(s.job.Backend)
	}
}

func (s *session) closeTrain() {
	if s.train != nil {
		s.train.Close()
		s.train = nil
	}
	for _, b := range []*formats.Batch{s.cur, s.next} {
		if b != nil {
			b.Free()
		}
	}
	s.cur, s.next = nil, nil
	s.eof = false
}

var errNoModel = errors.New("no model: send load first")

func (s *session) do(ctx context.Context, r *SessionRequest) (map[string]any, error) {
	if r.Cmd != "load" && r.Cmd != "quit" && r.Cmd != "ping" && s.m == nil {
		return nil, fmt.Errorf("%s: %w", r.Cmd, errNoModel)
	}
	switch r.Cmd {
	case "ping", "quit":
		return nil, nil
	case "load":
		return s.doLoad(r)
	case "info":
		return s.info(), nil
	case "set_source":
		if r.Source != nil {
			src := s.job.Train
			src.Path, src.Paths, src.NumSamples = *r.Source, nil, 0
			if err := src.Validate(); err != nil {
				return nil, fmt.Errorf("set_source: %w", err)
			}
			s.closeTrain()
			s.job.Train = src
		}
		if r.EvalSource != nil {
			src := s.job.Eval
			src.Path, src.NumSamples = *r.EvalSource, 0
			if err := src.Validate(); err != nil {
				return nil, fmt.Errorf("set_source: eval source: %w", err)
			}
			s.job.Eval = src
		}
		return nil, nil
	case "start_data_reading":
		s.closeTrain()
		return nil, s.openTrain()
	case "train":
		return s.doTrain(ctx)
	case "loss":
		l, err := s.m.Loss()
		return map[string]any{"loss": l}, err
	case "eval":
		return s.doEval(r.Batches)
	case "set_lr":
		if r.LR == nil {
			return nil, errors.New("set_lr: give lr")
		}
		// HugeCTR's set_learning_rate takes a float: the rate is float32.
		return nil, s.m.SetLearningRate(f32(*r.LR))
	case "lr_next":
		s.lrStep++
		return map[string]any{"lr": s.sched.LR(s.lrStep)}, nil
	case "reset_lr":
		if r.LR == nil {
			return nil, errors.New("reset_lr: give lr (base_lr)")
		}
		// HugeCTR's reset_learning_rate_scheduler takes floats for the rates
		// and the power.
		sc := optim.Schedule{BaseLR: f32(*r.LR), WarmupSteps: 1, DecaySteps: 1, DecayPower: 2}
		setI := func(dst *int64, v *int64) {
			if v != nil {
				*dst = *v
			}
		}
		setF := func(dst *float64, v *float64) {
			if v != nil {
				*dst = *v
			}
		}
		setI(&sc.WarmupSteps, r.WarmupSteps)
		setI(&sc.DecayStart, r.DecayStart)
		setI(&sc.DecaySteps, r.DecaySteps)
		setF(&sc.DecayPower, r.DecayPower)
		setF(&sc.EndLR, r.EndLR)
		sc.DecayPower, sc.EndLR = f32(sc.DecayPower), f32(sc.EndLR)
		if err := s.m.ResetLRScheduler(sc); err != nil {
			return nil, err
		}
		s.sched, s.lrStep = sc, 0
		return nil, nil
	case "freeze_dense":
		s.m.FreezeDense()
		return nil, nil
	case "unfreeze_dense":
		s.m.UnfreezeDense()
		return nil, nil
	case "freeze_embedding", "unfreeze_embedding":
		freeze := r.Cmd == "freeze_embedding"
		switch {
		case r.Name == "" && freeze:
			s.m.FreezeEmbeddings()
		case r.Name == "":
			s.m.UnfreezeEmbeddings()
		case freeze:
			return nil, s.m.FreezeEmbedding(r.Name)
		default:
			return nil, s.m.UnfreezeEmbedding(r.Name)
		}
		return nil, nil
	case "load_dense_weights":
		return nil, s.m.LoadFiles(Files{Dense: r.File})
	case "load_dense_optimizer_states":
		return nil, s.m.LoadFiles(Files{DenseOpt: r.File})
	case "load_sparse_weights":
		files, err := s.sparseFiles(r.Files, r.FilesMap)
		if err != nil {
			return nil, err
		}
		opt, err := s.sparseFiles(r.OptFiles, nil)
		if err != nil {
			return nil, err
		}
		return nil, s.m.LoadFiles(Files{Sparse: files, SparseOpt: opt})
	case "save":
		if r.Prefix == "" {
			return nil, errors.New("save: give prefix")
		}
		if err := s.m.CheckSave(r.Prefix); err != nil {
			return nil, err
		}
		return nil, s.m.SaveFiles(SnapshotFiles(r.Prefix, r.Iter, s.m.NumEmbeddings()))
	case "predict":
		return s.doPredict(r.Output)
	case "export_predictions":
		return s.exportPredictions(r.Output, r.Labels)
	}
	return nil, fmt.Errorf("unknown command %q (see docs/SESSION.md)", r.Cmd)
}

// f32 rounds x to float32, keeping values float32 cannot hold (an
// infinite rate is refused by name, not turned into another).
func f32(x float64) float64 {
	if y := float64(float32(x)); !math.IsInf(y, 0) || math.IsInf(x, 0) {
		return y
	}
	return x
}

func (s *session) doLoad(r *SessionRequest) (map[string]any, error) {
	j, err := s.load(r.Args)
	if err != nil {
		return nil, err
	}
	m, err := j.build(true)
	if err != nil {
		CloseBackend(j.Backend)
		return nil, err
	}
	if j.FreezeDense {
		m.FreezeDense()
	}
	for _, name := range j.FreezeEmbeddings {
		if err := m.FreezeEmbedding(name); err != nil {
			CloseBackend(j.Backend)
			return nil, fmt.Errorf("--freeze-embedding: %w", err)
		}
	}
	s.close()
	s.job, s.m, s.sched, s.lrStep = j, m, m.sched, 0
	if r.Repeat != nil {
		s.repeat = *r.Repeat
	}
	return s.info(), nil
}

func (s *session) info() map[string]any {
	return map[string]any{"iter": s.m.Iter(), "lr": s.m.LR(), "batchsize": s.m.BatchSize(),
		"embeddings": s.m.EmbeddingNames(), "device": s.m.Backend().Name()}
}

func (s *session) sparseFiles(list []string, byName map[string]string) ([]string, error) {
	if byName == nil {
		if len(list) > 0 && len(list) != s.m.NumEmbeddings() {
			return nil, fmt.Errorf("%d files for %d embeddings (give one per embedding, or a map from embedding name to file)", len(list), s.m.NumEmbeddings())
		}
		return list, nil
	}
	names := s.m.EmbeddingNames()
	out := make([]string, len(names))
	for name, f := range byName {
		found := false
		for i, n := range names {
			if n == name {
				out[i], found = f, true
			}
		}
		if !found {
			return nil, fmt.Errorf("no embedding %q (the model has %v)", name, names)
		}
	}
	return out, nil
}

func (s *session) openTrain() error {
	r, err := s.m.Open(s.job.Train)
	if err != nil {
		return err
	}
	s.train, s.passSamples = r, 0
	if s.cur == nil {
		if s.cur, err = formats.NewBatch(r.Schema(), s.m.batch, nil); err != nil {
			return err
		}
		if s.next, err = formats.NewBatch(r.Schema(), s.m.batch, nil); err != nil {
			return err
		}
	}
	s.readAhead()
	return nil
}

// dropShort says whether the session skips training batches shorter than
// the batch size: Job.DropIncomplete, else when the reader repeats.
func (s *session) dropShort() bool {
	if s.job.DropIncomplete != nil {
		return *s.job.DropIncomplete
	}
	return s.repeat
}

// readAhead reads the next training batch into s.next: a repeating
// reader (repeat_dataset) skips short batches and reopens at the end, as
// Fit's max_iter mode does; otherwise the short last batch is trained and
// eof is set once nothing is left.
func (s *session) readAhead() {
	for {
		n, err := s.train.Read(s.next)
		s.passSamples += int64(n)
		if err != nil && err != io.EOF {
			s.nextN, s.nextErr = 0, err
			return
		}
		if n > 0 && (n == s.m.batch || !s.dropShort()) {
			s.nextN, s.nextErr = n, nil
			if err == io.EOF && !s.repeat {
				s.eof = true // … after this batch
				s.nextErr = io.EOF
			}
			return
		}
		if err == io.EOF {
			if !s.repeat {
				s.nextN, s.nextErr, s.eof = 0, io.EOF, true
				return
			}
			if s.passSamples < int64(s.m.batch) && s.dropShort() {
				s.nextN, s.nextErr = 0, fmt.Errorf("the training data holds %d %s, less than one batch of %d, and repeat_dataset trains full batches only",
					s.passSamples, plural(s.passSamples, "sample", "samples"), s.m.batch)
				return
			}
			s.train.Close()
			r, oerr := s.m.Open(s.job.Train)
			if oerr != nil {
				s.train, s.nextN, s.nextErr = nil, 0, oerr
				return
			}
			s.train, s.passSamples = r, 0
		}
	}
}

func (s *session) doTrain(ctx context.Context) (map[string]any, error) {
	if s.train == nil {
		if s.eof {
			return map[string]any{"trained": false, "eof": true, "iter": s.m.Iter()}, nil
		}
		if err := s.openTrain(); err != nil {
			return nil, err
		}
	}
	if s.nextErr != nil && s.nextErr != io.EOF {
		err := s.nextErr
		s.closeTrain()
		return nil, err
	}
	if s.nextN == 0 {
		return map[string]any{"trained": false, "eof": true, "iter": s.m.Iter()}, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.cur, s.next = s.next, s.cur
	n := s.nextN
	s.cur.N = n
	wasLast := s.nextErr == io.EOF
	if err := s.m.TrainStep(s.cur); err != nil {
		return nil, fmt.Errorf("iteration %d: %w", s.m.Iter(), err)
	}
	if wasLast {
		s.nextN, s.nextErr = 0, io.EOF
	} else {
		s.readAhead()
	}
	return map[string]any{"trained": true, "eof": s.eof, "iter": s.m.Iter(), "samples": n}, nil
}

func (s *session) doEval(batches int) (map[string]any, error) {
	if s.job.Eval.Path == "" {
		return nil, errors.New("eval: no evaluation data (the reader's eval_source)")
	}
	if batches < 0 {
		return nil, fmt.Errorf("eval: batches %d < 0", batches)
	}
	r, err := s.m.Open(s.job.Eval)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	s.lastScores, s.lastLabels = s.lastScores[:0], s.lastLabels[:0]
	keep := func(sc, l []float32) error {
		s.lastScores = append(s.lastScores, sc...)
		s.lastLabels = append(s.lastLabels, l...)
		return nil
	}
	ev, err := s.m.evaluate(r, EvalSamples(batches, s.job.Solver.BatchSizeEval, s.m.batch), keep)
	if err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	resp := map[string]any{"auc": ev.AUC, "loss": ev.Loss, "hit_rate": ev.HitRate, "samples": ev.Samples}
	if len(ev.Tasks) > 0 {
		tasks := make([]map[string]any, len(ev.Tasks))
		for i, t := range ev.Tasks {
			tasks[i] = map[string]any{"label": t.Label, "weight": t.Weight, "auc": finiteOrNil(t.AUC), "loss": finiteOrNil(t.Loss)}
		}
		resp["tasks"] = tasks
	}
	return resp, nil
}

// finiteOrNil is v, or nil (JSON null) when v is NaN or infinite.
func finiteOrNil(v float64) any {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return v
}

func (s *session) exportPredictions(pred, labels string) (map[string]any, error) {
	if pred == "" || labels == "" {
		return nil, errors.New("export_predictions: give output and labels file names")
	}
	if s.lastScores == nil {
		return nil, errors.New("export_predictions: nothing evaluated yet (call eval and get_eval_metrics first)")
	}
	var p, l []byte
	for i := range s.lastScores {
		p = strconv.AppendFloat(p, float64(s.lastScores[i]), 'g', 9, 32)
		p = append(p, '\n')
		l = strconv.AppendFloat(l, float64(s.lastLabels[i]), 'g', 9, 32)
		l = append(l, '\n')
	}
	if err := atomicfile.WriteFile(pred, p); err != nil {
		return nil, err
	}
	return map[string]any{"samples": len(s.lastScores)}, atomicfile.WriteFile(labels, l)
}

func (s *session) doPredict(path string) (map[string]any, error) {
	if path == "" {
		return nil, errors.New("predict: give output")
	}
	if s.job.Eval.Path == "" {
		return nil, errors.New("predict: no evaluation data (the reader's eval_source)")
	}
	r, err := s.m.Open(s.job.Eval)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	scores, err := s.m.PredictSamples(nil, r, 0)
	if err != nil {
		return nil, err
	}
	t := s.m.PredictionWidth()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	b := predictionText(scores, t)
	return map[string]any{"samples": len(scores) / t, "width": t}, atomicfile.WriteFile(path, []byte(b.String()))
}

package datagen

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/raw"
	"github.com/ctrkit/ctrkit/internal/atomicfile"
)

// ChunkSamples is the number of samples generated from one derived random
// stream: sample i of file f comes from the stream of chunk i/ChunkSamples
// of f, so the output never depends on how chunks are spread over threads.
// Every Write of a batch to a format writer holds one chunk.
const ChunkSamples = 8192

// Stream identifiers mixed into derived seeds.
const (
	streamChunk = 0x6a09e667f3bcc908
	streamModel = 0xbb67ae8584caa73b
	streamCalib = 0x3c6ef372fe94f82b
)

// deriveSeed returns a seed for (master, stream, a, b, c) by chained
// SplitMix64 finalizers.
func deriveSeed(master, stream, a, b, c uint64) uint64 {
	h := mix64(master ^ stream)
	h = mix64(h ^ a*0x9e3779b97f4a7c15)
	h = mix64(h ^ b*0xc2b2ae3d27d4eb4f)
	return mix64(h ^ c*0x165667b19e3779f9)
}

// FileResult describes one written data file.
type FileResult struct {
	Path    string `json:"path"`
	Eval    bool   `json:"eval"`
	Samples int64  `json:"samples"`
	Bytes   int64  `json:"bytes"`
}

// Result summarizes a generation run.
type Result struct {
	Params  Params        `json:"-"`
	Files   []FileResult  `json:"files"`
	Samples int64         `json:"samples"`
	Bytes   int64         `json:"bytes"` // data files only
	Elapsed time.Duration `json:"-"`
	// PlantedAUC is the Bayes AUC of the planted model on the eval set:
	// the exact AUC of the true probabilities against the drawn labels
	// (label column 0) of the first min(eval samples, 2^25) eval samples.
	// NaN in the uniform label mode.
	PlantedAUC float64 `json:"-"`
	// CTR is the mean label of the eval samples the AUC is computed on
	// (planted mode; NaN otherwise).
	CTR float64 `json:"-"`
	// PlantedAUCs and CTRs are PlantedAUC and CTR of every label column
	// (each has a hidden model of its own; entry 0 is PlantedAUC); nil in
	// the uniform label mode.
	PlantedAUCs, CTRs []float64 `json:"-"`
}

// MBps returns the data bytes written per second, in MB (10^6 bytes).
func (r *Result) MBps() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Bytes) / 1e6 / r.Elapsed.Seconds()
}

// Generate writes the dataset p describes. progress, when not nil, is called
// (from several goroutines) with the number of samples just written. p is
// validated first; invalid parameters are a *ParamError and nothing is
// written. Data files are written in parallel (Params.Threads), each under
// a temporary name renamed when complete; file lists, metadata and
// gen_params.json are written last. The output is byte-identical for a given
// seed whatever the thread count.
//
// Generate replaces a dataset already there (as GenerateTo with Force).
func Generate(ctx context.Context, p Params, progress func(samples int64)) (*Result, error) {
	return GenerateTo(ctx, p, Output{Force: true}, progress)
}

// Output says how a generation run commits its files.
type Output struct {
	// Force replaces an existing dataset (else it is a atomicfile.ErrExists
	// error, before anything is generated).
	Force bool
	// NoSync skips the fsync before the final renames (scratch data).
	NoSync bool
	// Open, when set, opens the output files (tests inject faults).
	Open atomicfile.OpenFunc
}

// GenerateTo is Generate with the output options o. The files of the train
// set (its list, data files, metadata and gen_params.json, all under the
// directory of Source) and those of the eval set are each committed as a
// unit (atomicfile.Stage): written in a temporary directory swapped in when
// the run completes. When ctx is cancelled or anything fails, nothing of
// the new output remains and a dataset that was there stays whole.
func GenerateTo(ctx context.Context, p Params, o Output, progress func(samples int64)) (*Result, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	g, err := newGenerator(&p)
	if err != nil {
		return nil, err
	}
	if err := g.stage(o); err != nil {
		return nil, err
	}
	committed := false
	defer func() {
		if !committed {
			g.abort()
		}
	}()
	plan := p.Plan()
	res := &Result{Params: p, Files: make([]FileResult, len(plan)), PlantedAUC: math.NaN(), CTR: math.NaN()}
	var evalBase []int64 // first global eval sample index of each file
	var evalTotal int64
	for _, f := range plan {
		evalBase = append(evalBase, evalTotal)
		if f.Eval {
			evalTotal += f.Samples
		}
	}
	if g.model != nil {
		for range g.models {
			g.auc = append(g.auc, make([]uint64, min(evalTotal, maxAUCSamples)))
		}
	}
	threads := p.threads()
	fileLimit, workers := threads, 1
	if len(plan) < 2*threads {
		fileLimit, workers = 1, threads
	}
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(fileLimit)
	for i, f := range plan {
		eg.Go(func() error {
			n, err := g.writeFile(ectx, f, evalBase[i], workers, progress)
			if err != nil {
				return err
			}
			res.Files[i] = FileResult{Path: f.Path, Eval: f.Eval, Samples: f.Samples, Bytes: n}
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return nil, err
	}
	for _, f := range res.Files {
		res.Samples += f.Samples
		res.Bytes += f.Bytes
	}
	if g.model != nil {
		for _, a := range g.auc {
			var pos int64
			for _, v := range a {
				pos += int64(v & 1)
			}
			res.CTRs = append(res.CTRs, float64(pos)/float64(len(a)))
			res.PlantedAUCs = append(res.PlantedAUCs, aucPacked(a))
		}
		res.CTR, res.PlantedAUC = res.CTRs[0], res.PlantedAUCs[0]
	}
	if err := g.writeIndex(res); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := g.commit(); err != nil {
		return nil, err
	}
	committed = true
	res.Elapsed = time.Since(start)
	return res, nil
}

// writeFile writes one data file, generating chunks on the calling
// goroutine (workers ≤ 1) or on a pipeline of workers; it returns the
// file's size.
func (g *generator) writeFile(ctx context.Context, f OutputFile, evalBase int64, workers int, progress func(int64)) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	w, err := g.create(f.Path)
	if err != nil {
		return 0, fmt.Errorf("creating %s: %w", f.Path, err)
	}
	nchunks := int((f.Samples + ChunkSamples - 1) / ChunkSamples)
	if workers > nchunks {
		workers = nchunks
	}
	write := func(b *formats.Batch) error {
		if err := w.Write(b); err != nil {
			return fmt.Errorf("writing %s: %w", f.Path, err)
		}
		if progress != nil {
			progress(int64(b.N))
		}
		return nil
	}
	if workers <= 1 {
		b, err := g.newBatch()
		if err != nil {
			w.Abort()
			return 0, err
		}
		defer b.Free()
		for c := 0; c < nchunks; c++ {
			if err := ctx.Err(); err != nil {
				w.Abort()
				return 0, err
			}
			g.fill(b, f, evalBase, c)
			if err := write(b); err != nil {
				w.Abort()
				return 0, err
			}
		}
	} else if err := g.pipeline(ctx, f, evalBase, nchunks, workers, write); err != nil {
		w.Abort()
		return 0, err
	}
	if err := w.Close(); err != nil {
		return 0, fmt.Errorf("closing %s: %w", f.Path, err)
	}
	st, err := g.files.stat(f.Path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// pipeline generates the chunks of one file on workers goroutines and writes
// them strictly in order: worker k fills chunks k, k+W, k+2W, … and hands
// each to its own channel; the writer takes chunk c from channel c mod W.
// Each worker owns two batches, recycled through its free channel, so at
// most 2·W chunks are in memory.
func (g *generator) pipeline(ctx context.Context, f OutputFile, evalBase int64, nchunks, workers int, write func(*formats.Batch) error) error {
	eg, ctx := errgroup.WithContext(ctx)
	full := make([]chan *formats.Batch, workers)
	free := make([]chan *formats.Batch, workers)
	var all []*formats.Batch
	defer func() {
		for _, b := range all {
			b.Free()
		}
	}()
	for k := range workers {
		full[k] = make(chan *formats.Batch, 1)
		free[k] = make(chan *formats.Batch, 2)
		for range 2 {
			b, err := g.newBatch()
			if err != nil {
				return err
			}
			all = append(all, b)
			free[k] <- b
		}
	}
	for k := range workers {
		eg.Go(func() error {
			for c := k; c < nchunks; c += workers {
				var b *formats.Batch
				select {
				case b = <-free[k]:
				case <-ctx.Done():
					return ctx.Err()
				}
				g.fill(b, f, evalBase, c)
				select {
				case full[k] <- b:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
	}
	eg.Go(func() error {
		for c := 0; c < nchunks; c++ {
			k := c % workers
			select {
			case b := <-full[k]:
				if err := write(b); err != nil {
					return err
				}
				free[k] <- b
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	return eg.Wait()
}

// newGenerator builds the per-run state: schema, samplers, planted model.
func newGenerator(p *Params) (*generator, error) {
	g := &generator{p: p, lo: make([]int64, p.NumSlot), samplers: make([]slotSampler, p.NumSlot)}
	g.schema = p.Schema()
	var off int64
	alpha := p.EffectiveAlpha()
	for s := 0; s < p.NumSlot; s++ {
		size := p.SlotSizeArray[s]
		if p.Format == Norm {
			g.lo[s] = off
		}
		off += size
		g.samplers[s].nnz = p.NNZ(s)
		var err error
		if p.DistType == DistUniform {
			g.samplers[s].u, err = NewUniform(g.lo[s], g.lo[s]+size-1)
		} else {
			g.samplers[s].pl, err = NewPowerLaw(g.lo[s], g.lo[s]+size-1, alpha)
		}
		if err != nil {
			return nil, &ParamError{Param: "slot_size_array", Msg: err.Error()}
		}
	}
	g.denseScale = 1
	switch {
	case p.Format == Criteo || p.Format == Raw && !p.FloatLabelDense:
		g.intDense = true
		g.denseScale = 1 / math.Log(intDenseLevels)
	}
	for i := range g.intTable {
		g.intTable[i] = int32(math.Floor(math.Exp((float64(i)+0.5)/float64(len(g.intTable))*math.Log(intDenseLevels)))) - 1
	}
	if p.LabelMode == Planted {
		// Label column j has a hidden model of its own (seeded by j).
		for j := 0; j < p.LabelDim; j++ {
			g.models = append(g.models, newModel(p, deriveSeed(p.Seed, streamModel, uint64(j), 0, 0)))
		}
		g.model = g.models[0]
		for s := range g.samplers {
			w := make([]float64, min(p.SlotSizeArray[s], hotWeights))
			for k := range w {
				w[k] = g.model.keyWeight(s, int64(k))
			}
			g.samplers[s].hotW = w
			for _, m := range g.models[1:] {
				w := make([]float64, min(p.SlotSizeArray[s], hotWeights))
				for k := range w {
					w[k] = m.keyWeight(s, int64(k))
				}
				g.samplers[s].hotWx = append(g.samplers[s].hotWx, w)
			}
		}
		if err := g.calibrate(); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// intDenseLevels: integer dense values (Raw int32, Criteo text) are drawn
// log-uniformly in [0, intDenseLevels−1].
const intDenseLevels = 4096

type slotSampler struct {
	pl  *PowerLaw
	u   *Uniform
	nnz int // nnz_array entry
	// hotW[k] caches the planted weight of slot-local key k for the
	// smallest keys (the hottest under the power law): the values
	// model.keyWeight computes, without hashing.
	hotW []float64
	// hotWx[j−1] caches those of label column j's model (j ≥ 1).
	hotWx [][]float64
}

// hotWeights is the number of slot-local keys whose planted weight is
// cached per slot (32 KiB).
const hotWeights = 4096

type generator struct {
	p          *Params
	schema     formats.Schema
	lo         []int64 // first key of each slot's range
	samplers   []slotSampler
	model      *model   // nil in the uniform label mode; models[0]
	models     []*model // one per label column (planted mode)
	intDense   bool     // dense values are integers (Raw int32, Criteo)
	denseScale float64
	intTable   [4096]int32 // log-uniform integer dense values
	// auc[j] holds float32bits(p)<<1 | label of label column j of each
	// eval sample; each index is written by exactly one chunk.
	auc [][]uint64
	// files creates the output files in the run's Stages.
	files *stages
}

// Schema returns the schema the data files are written with.
func (p *Params) Schema() formats.Schema {
	kt := formats.KeyU32
	if p.I64InputKey || p.Format == Criteo {
		kt = formats.KeyI64 // Criteo: -1 marks a missing categorical internally
	}
	s := formats.Schema{LabelDim: p.LabelDim, DenseDim: p.DenseDim, KeyType: kt}
	for i := 0; i < p.NumSlot; i++ {
		n := p.NNZ(i)
		sl := formats.Slot{Name: fmt.Sprintf("C%d", i+1), MaxNNZ: n}
		switch p.Format {
		case Norm:
			sl.Hotness = n
		case Parquet:
			sl.Size = p.SlotSizeArray[i]
			if n == 1 {
				sl.Hotness = 1
			}
		case Raw:
			sl.Size = p.SlotSizeArray[i]
			sl.Hotness = n
		case Criteo:
			sl.Hotness, sl.MaxNNZ = 1, 1
		}
		s.Slots = append(s.Slots, sl)
	}
	if p.Format == Raw {
		s.LabelType, s.DenseType = formats.Int32, formats.Int32
		if p.FloatLabelDense {
			s.DenseType = formats.Float32
			if p.EffectiveRawLayout() == raw.OneHot {
				s.LabelType = formats.Float32
			}
		}
	}
	return s
}

func (g *generator) newBatch() (*formats.Batch, error) {
	return formats.NewBatch(&g.schema, ChunkSamples, nil)
}

// calibrate fits the planted bias on calibrationSamples samples drawn, by
// the same code as the data, from a stream of their own.
func (g *generator) calibrate() error {
	b, err := g.newBatch()
	if err != nil {
		return err
	}
	defer b.Free()
	r := rand.NewPCG(deriveSeed(g.p.Seed, streamCalib, 0, 0, 0), streamCalib)
	logits := make([][]float64, len(g.models))
	for j := range logits {
		logits[j] = make([]float64, calibrationSamples)
	}
	g.samples(b, r, calibrationSamples, 0, nil, logits)
	for j, m := range g.models {
		m.fitBias(logits[j])
	}
	return nil
}

// denseValue draws Criteo dense column j (missing at MissingRate, stored as
// NaN) and adds its planted contribution to z. Integer values x are
// log-uniform in [0, 4095]; the model sees u = ln(x+1)/ln(4096) ∈ [0, 1] as
// (u − ½)·√12, as samples does for Raw int32 values (stored there as
// ln(x+1) through formats.DenseFromInt32, which the Raw writer inverts
// exactly) and for float values u ∈ [0, 1).
func (g *generator) denseValue(r *rand.PCG, z float64, zx []float64, j int) (float32, float64) {
	if g.p.MissingRate > 0 && unitFloat(r.Uint64()) < g.p.MissingRate {
		return float32(math.NaN()), z
	}
	var v float32
	var u float64
	if g.intDense {
		x := g.intTable[r.Uint64()>>52]
		v = formats.DenseFromInt32(x)
		u = float64(v) * g.denseScale
		if g.p.Format == Criteo {
			v = float32(x)
		}
	} else {
		v = float32(r.Uint64()>>40) * (1.0 / (1 << 24))
		u = float64(v)
	}
	if g.model != nil {
		z += g.model.weight[j] * (u - 0.5) * sqrt12
		for e, m := range g.models[1:] {
			zx[e] += m.weight[j] * (u - 0.5) * sqrt12
		}
	}
	return v, z
}

// fill generates chunk c of file f into b.
func (g *generator) fill(b *formats.Batch, f OutputFile, evalBase int64, c int) {
	first := int64(c) * ChunkSamples
	n := int(min(ChunkSamples, f.Samples-first))
	eval := uint64(0)
	var auc [][]uint64
	if f.Eval {
		eval = 1
		for _, a := range g.auc {
			if lo := evalBase + first; lo < int64(len(a)) {
				auc = append(auc, a[lo:min(lo+int64(n), int64(len(a)))])
			}
		}
	}
	seed := deriveSeed(g.p.Seed, streamChunk, eval, uint64(f.Index), uint64(c))
	g.samples(b, rand.NewPCG(seed, seed^streamChunk), n, first, auc, nil)
}

// samples fills b with n samples drawn from r; first is the index of the
// first one in its file (for Raw's label = i mod 2). In the planted mode,
// float32bits(P_j)<<1 | label j of sample i goes to auc[j][i] when i <
// len(auc[j]), and with logits != nil the labels are skipped and the
// logits of label j without bias are stored in logits[j] instead
// (calibration). The random values are
// consumed in a fixed order: per sample the dense values, then per slot
// (missing draw for Criteo, nnz draw for Parquet multi-hot) the keys, then
// the labels.
func (g *generator) samples(b *formats.Batch, r *rand.PCG, n int, first int64, auc [][]uint64, logits [][]float64) {
	p := g.p
	labels, dense, offsets, k32, k64 := b.Full()
	L, D, S := p.LabelDim, p.DenseDim, p.NumSlot
	uniform := p.LabelMode == UniformLabels
	rawHuge := uniform && p.Format == Raw
	criteo := p.Format == Criteo
	missCat := criteo && p.MissingRate > 0
	parquet := p.Format == Parquet
	m := g.model
	var extra []*model // the models of label columns 1…L−1
	if m != nil {
		extra = g.models[1:]
	}
	zx := make([]float64, len(extra)) // their logits
	pos := int32(0)
	offsets[0] = 0
	for i := 0; i < n; i++ {
		var z float64
		clear(zx)
		d := dense[i*D : (i+1)*D]
		switch {
		case rawHuge: // HugeCTR: dense j = j
			for j := range d {
				if p.FloatLabelDense {
					d[j] = float32(j)
				} else {
					d[j] = formats.DenseFromInt32(int32(j))
				}
			}
		case criteo:
			for j := range d {
				d[j], z = g.denseValue(r, z, zx, j)
			}
		case g.intDense: // Raw int32: ln(x+1), x log-uniform
			for j := range d {
				v := formats.DenseFromInt32(g.intTable[r.Uint64()>>52])
				d[j] = v
				if m != nil {
					z += m.weight[j] * (float64(v)*g.denseScale - 0.5) * sqrt12
					for e, x := range extra {
						zx[e] += x.weight[j] * (float64(v)*g.denseScale - 0.5) * sqrt12
					}
				}
			}
		default: // float32 uniform in [0, 1)
			for j := range d {
				v := float32(r.Uint64()>>40) * (1.0 / (1 << 24))
				d[j] = v
				if m != nil {
					z += m.weight[j] * (float64(v) - 0.5) * sqrt12
					for e, x := range extra {
						zx[e] += x.weight[j] * (float64(v) - 0.5) * sqrt12
					}
				}
			}
		}
		row := offsets[i*S+1 : (i+1)*S+1]
		for s := 0; s < S; s++ {
			if missCat && unitFloat(r.Uint64()) < p.MissingRate {
				k64[pos] = -1
				pos++
				row[s] = pos
				continue
			}
			sm := &g.samplers[s]
			nnz := sm.nnz
			if parquet && nnz > 1 {
				nnz = 1 + int(r.Uint64()%uint64(nnz))
			}
			for ; nnz > 0; nnz-- {
				// Inlined slotSampler.draw and generator.weight.
				u := r.Uint64()
				var key int64
				if pl := sm.pl; pl != nil {
					if e := pl.guide[u>>pl.shift]; e&guidePure != 0 {
						key = pl.lo + int64(e&^guidePure)
					} else {
						key = pl.At(unitFloat(u))
					}
				} else {
					key = sm.u.lo + int64(uint64n(u, sm.u.n))
				}
				if m != nil {
					if k := key - g.lo[s]; uint64(k) < uint64(len(sm.hotW)) {
						z += sm.hotW[k]
						for e, w := range sm.hotWx {
							zx[e] += w[k]
						}
					} else {
						z += m.keyWeight(s, k)
						for e, x := range extra {
							zx[e] += x.keyWeight(s, k)
						}
					}
				}
				if k64 != nil {
					k64[pos] = key
				} else {
					k32[pos] = uint32(key)
				}
				pos++
			}
			row[s] = pos
		}
		if logits != nil {
			logits[0][i] = z
			for e := range extra {
				logits[e+1][i] = zx[e]
			}
			continue
		}
		l := labels[i*L : (i+1)*L]
		switch {
		case rawHuge: // HugeCTR: label = i mod 2
			for j := range l {
				l[j] = float32((first + int64(i)) % 2)
			}
		case uniform && criteo:
			for j := range l {
				l[j] = float32(r.Uint64() >> 63)
			}
		case uniform:
			for j := range l {
				l[j] = float32(r.Uint64()>>40) * (1.0 / (1 << 24))
			}
		default:
			for j := range l {
				lz := z
				if j > 0 {
					lz = zx[j-1]
				}
				prob := sigmoid(lz + g.models[j].bias)
				l[j] = 0
				if unitFloat(r.Uint64()) < prob {
					l[j] = 1
				}
				if j < len(auc) && i < len(auc[j]) {
					auc[j][i] = uint64(math.Float32bits(float32(prob)))<<1 | uint64(l[j])
				}
			}
		}
	}
	b.SetLen(n)
}

var sqrt12 = math.Sqrt(12)

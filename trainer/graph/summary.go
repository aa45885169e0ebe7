package graph

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Summary writes a human-readable description of cfg: the input, every
// layer with its tensors, output shape and parameter count, the totals, and
// the solver and optimizer when the file held them. When shape inference
// fails it prints what it inferred, then returns the error.
func Summary(w io.Writer, cfg *Config) error {
	g := cfg.Graph
	info, ierr := g.Infer(cfg.Optimizer)
	name := g.ModelName
	if name == "" {
		name = "(unnamed)"
	}
	fmt.Fprintf(w, "model %s\n", name)
	in := g.Input
	for i, t := range in.LabelTops {
		fmt.Fprintf(w, "  label  %s [B, %d]\n", t, in.LabelDims[i])
	}
	fmt.Fprintf(w, "  dense  %s [B, %d]\n", in.DenseTop, in.DenseDim)
	for _, s := range in.Sparse {
		fixed := "variable"
		if s.IsFixedLength {
			fixed = "fixed"
		}
		fmt.Fprintf(w, "  sparse %s %d slots, %s length, ≤ %d keys a sample\n", s.Top, s.SlotNum, fixed, s.MaxFeatures())
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\ttype\tbottom\ttop\toutput\tparams")
	for i, e := range g.Embeddings {
		out, params := "?", "?"
		if i < len(info.Embeddings) {
			ei := info.Embeddings[i]
			out = ei.Out.String()
			params = fmt.Sprintf("%d rows × %d", ei.Rows, e.VecSize)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", 1+i, e.Type, e.Bottom, e.Top, out, params)
	}
	for i, l := range g.Layers {
		out, params := "?", "?"
		if i < len(info.Layers) {
			li := info.Layers[i]
			var s []string
			for _, o := range li.Out {
				s = append(s, o.String())
			}
			out = strings.Join(s, " ")
			if IsLoss(l.Type) {
				out = "[1] (loss)"
			}
			params = fmt.Sprint(li.Params)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", 1+len(g.Embeddings)+i, l.Type,
			strings.Join(l.Bottom, ","), strings.Join(l.Top, ","), out, params)
	}
	tw.Flush()
	if ierr != nil {
		fmt.Fprintf(w, "dense parameters: ? (inferred %d before the error)\n", info.DenseParams)
		return ierr
	}
	fmt.Fprintf(w, "dense parameters: %d (%.2f MiB float32)\n", info.DenseParams, float64(info.DenseParams)*4/(1<<20))
	fmt.Fprintf(w, "embedding parameters: %d (capacity, %.2f MiB float32)\n", info.EmbeddingParams, float64(info.EmbeddingParams)*4/(1<<20))
	if s := cfg.Solver; s != nil {
		fmt.Fprintf(w, "solver: batchsize %d, batchsize_eval %d, ", s.BatchSize, s.BatchSizeEval)
		if s.NumEpochs > 0 {
			fmt.Fprintf(w, "num_epochs %d", s.NumEpochs)
		} else {
			fmt.Fprintf(w, "max_iter %d", s.MaxIter)
		}
		fmt.Fprintf(w, ", display %d, eval_interval %d, max_eval_batches %d", s.Display, s.EvalInterval, s.MaxEvalBatches)
		if s.I64InputKey {
			fmt.Fprint(w, ", i64 keys")
		}
		switch p := s.Precision(); {
		case s.UseMixedPrecision:
			fmt.Fprintf(w, ", mixed precision (scaler %g)", s.Scaler)
		case p != FP32:
			fmt.Fprintf(w, ", precision %s", p)
		}
		if s.ScalerSet && !s.UseMixedPrecision {
			fmt.Fprintf(w, ", loss scale %g", s.Scaler)
		}
		fmt.Fprintln(w)
	}
	if o := cfg.Optimizer; o != nil {
		fmt.Fprintf(w, "optimizer: %s (%s update), lr %g", o.Type, o.UpdateType, o.LearningRate)
		if o.WarmupSteps > 0 || o.DecaySteps > 0 {
			fmt.Fprintf(w, ", warmup %d, decay start %d steps %d power %g end %g", o.WarmupSteps, o.DecayStart, o.DecaySteps, o.DecayPower, o.EndLR)
		}
		fmt.Fprintln(w)
	}
	if r := cfg.Reader; r != nil {
		fmt.Fprintf(w, "data: %s, source %s, eval_source %s, check %s\n", r.Format, strings.Join(r.Source, ","), r.EvalSource, r.Check)
	}
	return nil
}

package datagen

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"

	"github.com/ctrkit/ctrkit/internal/progress"
)

// RunOptions are the options of Run.
type RunOptions struct {
	// RandomSeed draws a random master seed instead of using Params.Seed
	// (the command line does this when --seed is not given).
	RandomSeed bool
	// Output says how the files are committed (GenerateTo).
	Output Output
}

// Run validates p, prints the seed, generates the dataset with a progress
// bar (drawn only when w is a terminal) and prints a one-paragraph summary
// to w: files, samples, bytes, seconds, MB/s, seed and planted AUC.
func Run(ctx context.Context, p Params, o RunOptions, w io.Writer) (*Result, error) {
	if o.RandomSeed {
		p.Seed = rand.Uint64()
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	var total int64
	for _, f := range p.Plan() {
		total += f.Samples
	}
	fmt.Fprintf(w, "generating %s data with seed %s\n", p.Format, formatSeed(p.Seed))
	bar := progress.New(w, total, "generating", "samples")
	res, err := GenerateTo(ctx, p, o.Output, bar.Add)
	bar.Finish()
	if err != nil {
		return nil, err
	}
	res.WriteSummary(w)
	return res, nil
}

// WriteSummary prints the one-paragraph summary of a run.
func (r *Result) WriteSummary(w io.Writer) {
	p := &r.Params
	var train, eval int
	for _, f := range r.Files {
		if f.Eval {
			eval++
		} else {
			train++
		}
	}
	where := p.Source + " and " + p.EvalSource
	if p.Format != Raw {
		where = "file lists " + where
	}
	fmt.Fprintf(w, "Wrote %d %s files (%d train, %d eval; %s): %d samples, %d bytes in %.2f s (%.1f MB/s), seed %s, ",
		len(r.Files), p.Format, train, eval, where, r.Samples, r.Bytes, r.Elapsed.Seconds(), r.MBps(), formatSeed(p.Seed))
	if math.IsNaN(r.PlantedAUC) {
		fmt.Fprintf(w, "labels %s (no planted AUC).\n", p.LabelMode)
	} else {
		if len(r.PlantedAUCs) > 1 {
			fmt.Fprintf(w, "planted AUCs")
			for j, a := range r.PlantedAUCs {
				sep := ","
				if j == 0 {
					sep = ""
				}
				fmt.Fprintf(w, "%s label %d %.4f (CTR %.3f)", sep, j, a, r.CTRs[j])
			}
			fmt.Fprintf(w, " (Bayes AUCs of the hidden models, one per label column, on the eval set).\n")
		} else {
			fmt.Fprintf(w, "planted AUC %.4f (Bayes AUC of the hidden model on the eval set, CTR %.3f).\n", r.PlantedAUC, r.CTR)
		}
	}
}

package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ctrkit/ctrkit/asyncio"
	"github.com/ctrkit/ctrkit/dataset"

	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/ctrkit/ctrkit/trainer/model"
)

// withSchemaFlags adds the shared schema flags (schemaflags.go) that the
// model commands do not define under the same name already.
func withSchemaFlags(fs []cli.Flag) []cli.Flag {
	have := map[string]bool{}
	for _, f := range fs {
		for _, n := range f.Names() {
			have[n] = true
		}
	}
	for _, f := range schemaFlags(false) {
		// Training takes slot offsets from slot_size_array and reads no
		// Criteo text: --slot-offsets and --vocab-file are not its flags.
		if n := f.Names()[0]; !have[n] && n != "slot-offsets" && n != "vocab-file" {
			fs = append(fs, f)
		}
	}
	return fs
}

// dataFromConfigAndFlags sets the job's training and evaluation sources
// from the config's data section, then the flags.
func dataFromConfigAndFlags(c *cli.Context, j *model.Job, cfg *graph.Config, train bool) error {
	rp := cfg.Reader
	if rp == nil {
		rp = &graph.ReaderParams{Format: "Norm", Check: "Sum"}
	}
	j.Train, j.Eval = model.Source{}, model.Source{}
	var err error
	if j.Train, j.Eval, err = model.ReaderSources(rp, &cfg.Graph.Input, j.Solver.I64InputKey, c.String("config")); err != nil {
		return err
	}
	if !train {
		j.Eval.CacheBatches = 0 // one pass: nothing to replay
	}
	apply := func(f func(*model.Source)) { f(&j.Train); f(&j.Eval) }
	if c.IsSet("format") {
		f, async, err := model.ParseFormat(strings.ToLower(c.String("format")))
		if err != nil {
			return fmt.Errorf("--format: %q is not norm, raw, raw-async or parquet", c.String("format"))
		}
		apply(func(s *model.Source) {
			s.Format = f
			switch {
			case !async:
				s.Async = nil
			case s.Async == nil:
				s.Async = &asyncio.Params{}
			}
		})
	}
	if c.IsSet("reader") {
		switch r := strings.ToLower(c.String("reader")); r {
		case "sync":
			apply(func(s *model.Source) { s.Async = nil })
		case "async":
			if j.Train.Format != dataset.Raw {
				return fmt.Errorf("--reader async reads Raw files (HugeCTR's RawAsync); the format is %s", j.Train.FormatName())
			}
			apply(func(s *model.Source) {
				if s.Async == nil {
					s.Async = &asyncio.Params{}
				}
			})
		default:
			return fmt.Errorf("--reader: want sync or async, not %q", r)
		}
	}
	if err := detectSources(c, j, cfg, train); err != nil {
		return err
	}
	if c.IsSet("check-type") {
		mode, err := norm.ParseCheckMode(c.String("check-type"))
		if err != nil {
			return fmt.Errorf("--check-type: %w", err)
		}
		apply(func(s *model.Source) { s.Check = mode })
	}
	if c.IsSet("data-slot-size-array") {
		sizes, err := parseInts[int64]("data-slot-size-array", c.String("data-slot-size-array"))
		if err != nil {
			return err
		}
		if sizes, err = dataset.PerSlot("--data-slot-size-array", sizes, modelSlots(cfg)); err != nil {
			return err
		}
		apply(func(s *model.Source) { s.SlotSizeArray = sizes })
	} else if cfg.Reader == nil && c.String("model") != "" && modelOffsets(j, train) {
		// Raw and Parquet keys are slot-local (SPEC §3.3), and Norm keys
		// whose sidecar says so; the reference model's vocabulary is the
		// slot sizes.
		var sizes []int64
		for _, e := range cfg.Graph.Embeddings {
			sizes = append(sizes, e.SlotSizeArray...)
		}
		apply(func(s *model.Source) { s.SlotSizeArray = sizes })
	}
	if c.IsSet("num-workers") {
		apply(func(s *model.Source) { s.Workers = c.Int("num-workers") })
	}
	if err := schemaOntoSources(c, j, cfg); err != nil {
		return err
	}
	warnKeyConvention(c.App.ErrWriter, j, train)
	if train && j.Train.Path == "" {
		return fmt.Errorf("no training data: give --source")
	}
	if !train && j.Eval.Path == "" {
		return fmt.Errorf("no data: give --eval-source")
	}
	if train {
		// Every source must exist before training starts (a bad second
		// source list would otherwise fail an epoch in).
		if err := j.Train.Validate(); err != nil {
			return fmt.Errorf("source: %w", err)
		}
	}
	if j.Eval.Path != "" {
		if err := j.Eval.Validate(); err != nil {
			return fmt.Errorf("eval source: %w", err)
		}
	}
	return nil
}

// modelSlots is the number of slots of the model's sparse inputs.
func modelSlots(cfg *graph.Config) int {
	n := 0
	for _, s := range cfg.Graph.Input.Sparse {
		n += s.SlotNum
	}
	return n
}

// schemaOntoSources applies the shared schema flags: value types and Raw
// layout, Norm framing, and the shape flags checked against the model.
func schemaOntoSources(c *cli.Context, j *model.Job, cfg *graph.Config) error {
	sp, err := specFromFlags(c)
	if err != nil {
		return err
	}
	in := cfg.Graph.Input
	slots := modelSlots(cfg)
	var nnz []int
	for _, s := range in.Sparse {
		nnz = append(nnz, s.NNZPerSlot...)
	}
	label := 0
	for _, d := range in.LabelDims {
		label += d
	}
	if c.IsSet("label-dim") && sp.LabelDim != label || c.IsSet("num-slot") && sp.NumSlot != slots ||
		c.IsSet("dense-dim") && c.String("config") != "" && c.Int("dense-dim") != in.DenseDim {
		return fmt.Errorf("the model has label_dim %d, dense_dim %d, %d slots; the flags say otherwise (the model's shape decides)", label, in.DenseDim, slots)
	}
	if c.IsSet("nnz-array") {
		want, err := dataset.PerSlot("--nnz-array", sp.NNZ, len(nnz))
		if err != nil {
			return err
		}
		for i := range nnz {
			if want[i] != nnz[i] {
				return fmt.Errorf("--nnz-array %v differs from the model's nnz_per_slot %v", sp.NNZ, nnz)
			}
		}
	}
	apply := func(f func(*model.Source)) { f(&j.Train); f(&j.Eval) }
	if c.IsSet("float-label-dense") {
		apply(func(s *model.Source) { s.FloatLabelDense = c.Bool("float-label-dense") })
	}
	if sp.RawLayoutSet {
		apply(func(s *model.Source) { s.Layout, s.LayoutSet = sp.RawLayout, true })
	}
	if sp.LabelTypeSet {
		apply(func(s *model.Source) { s.LabelType, s.LabelTypeSet = sp.LabelType, true })
	}
	if sp.DenseTypeSet {
		apply(func(s *model.Source) { s.DenseType, s.DenseTypeSet = sp.DenseType, true })
	}
	if sp.SkipCorrupt {
		apply(func(s *model.Source) { s.SkipCorrupt = true })
	}
	if (sp.RawLayoutSet || sp.LabelTypeSet || sp.DenseTypeSet || c.IsSet("float-label-dense")) &&
		j.Train.Format != dataset.Raw {
		return fmt.Errorf("--raw-layout, --label-type, --dense-type and --float-label-dense describe Raw data; the format is %s", j.Train.FormatName())
	}
	if sp.SkipCorrupt && j.Train.Format != dataset.Norm {
		return fmt.Errorf("--skip-corrupt is for Norm data; the format is %s", j.Train.FormatName())
	}
	return nil
}

package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/ctrkit/ctrkit/dataset"

	"github.com/ctrkit/ctrkit/trainer/graph"
)

func init() {
	commands = append(commands, &cli.Command{
		Name:  "summary",
		Usage: "print a model's layers, tensor shapes and parameter counts",
		Description: "Reads a HugeCTR model description (graph JSON from graph_to_json, or a JSON config\n" +
			"with solver/optimizer/layers, old or new schema) with --config, or builds a reference\n" +
			"model with --model. --out-graph writes the graph JSON HugeCTR's graph_to_json would.",
		Flags: append(modelFlags(),
			&cli.StringFlag{Name: "out-graph", Usage: "write the model's graph JSON to `FILE`"},
			renamed("graph-out", "out-graph"),
			&cli.IntFlag{Name: "gpus", Usage: "GPU count for max_vocabulary_size_global in --out-graph (default: as read, else 1)"},
			jsonFlag("layers with output_shapes and params, dense_params, embedding_params, bytes"),
		),
		Action: runSummary,
	})
}

// modelFlags select a model: a file, or a reference model shaped by flags.
func modelFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "config", Usage: "HugeCTR model JSON `FILE` (graph JSON or JSON config)"},
		&cli.StringFlag{Name: "model", Usage: "reference model: dlrm | wdl | dcn | dcnv2 | deepfm (HugeCTR's sample models; --width, --vec-size scale them)"},
		vflag("dense-dim", withDefaultText("--model: 13")),
		vflag("slot-size-array", withDefaultText("--model: 26 slots of 10000")),
		vflag("num-slot", withDefaultText("--model: --slot-size-array's count, else 26")),
		vflag("nnz-array", withDefaultText("--model: 1")),
		&cli.IntFlag{Name: "vec-size", Usage: "--model: embedding width (default the model's)"},
		&cli.Float64Flag{Name: "width", Value: 1, Usage: "--model: scale of the hidden layer widths (e.g. 0.125 for a small model)"},
		denseFromFlag,
	}
}

// loadBaseModel returns the model description --config or --model
// selects (loadModel adds --dense-from).
func loadBaseModel(c *cli.Context) (*graph.Config, error) {
	file, model := c.String("config"), c.String("model")
	switch {
	case file != "" && model != "":
		return nil, fmt.Errorf("give --config or --model, not both")
	case file != "":
		return graph.ReadFile(file)
	case model != "":
		o := graph.RefOptions{DenseDim: 13, NNZ: 1, VecSize: c.Int("vec-size"), Width: c.Float64("width")}
		if c.IsSet("dense-dim") {
			o.DenseDim = c.Int("dense-dim")
		}
		if c.IsSet("nnz-array") {
			nnz, err := parseInts[int]("nnz-array", c.String("nnz-array"))
			if err != nil {
				return nil, err
			}
			for _, n := range nnz {
				if n != nnz[0] {
					return nil, fmt.Errorf("--nnz-array %s: the reference models take one nnz for every slot", c.String("nnz-array"))
				}
			}
			o.NNZ = nnz[0]
		}
		if s := c.String("slot-size-array"); s != "" {
			sizes, err := parseInts[int64]("slot-size-array", s)
			if err != nil {
				return nil, err
			}
			slots := len(sizes)
			if c.IsSet("num-slot") {
				slots = c.Int("num-slot")
			} else if slots == 1 {
				slots = 26 // one value: every slot of the default 26
			}
			if o.SlotSizes, err = dataset.PerSlot("--slot-size-array", sizes, slots); err != nil {
				return nil, err
			}
		} else {
			slots := 26
			if c.IsSet("num-slot") {
				slots = c.Int("num-slot")
			}
			o.SlotSizes = make([]int64, max(slots, 0))
			for i := range o.SlotSizes {
				o.SlotSizes[i] = 10000
			}
		}
		cfg, err := graph.Reference(model, o)
		if err != nil || !(c.IsSet("optimizer") || c.IsSet("update-type")) {
			return cfg, err
		}
		// The embeddings' workspace holds the optimizer's state: size it
		// for the optimizer the flags choose.
		if o.Optimizer, err = optimizerFromFlags(c, cfg.Optimizer); err != nil {
			return nil, err
		}
		return graph.Reference(model, o)
	}
	return nil, fmt.Errorf("give a model: --config FILE or --model dlrm|wdl|dcn|dcnv2|deepfm")
}

func runSummary(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("summary takes no arguments, got %q", c.Args().First())
	}
	cfg, err := loadModel(c)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		s, err := summaryOf(cfg)
		if err != nil {
			return err
		}
		if err := printJSON(c.App.Writer, s); err != nil {
			return err
		}
	} else if err := graph.Summary(c.App.Writer, cfg); err != nil {
		return err
	}
	if out := c.String("out-graph"); out != "" {
		o := graph.WriteOptions{Optimizer: cfg.Optimizer, GPUs: c.Int("gpus")}
		if err := cfg.Graph.WriteFile(out, o); err != nil {
			return err
		}
		w := c.App.Writer
		if c.Bool("json") {
			w = c.App.ErrWriter // stdout holds the JSON alone
		}
		fmt.Fprintf(w, "wrote %s\n", out)
	}
	return nil
}

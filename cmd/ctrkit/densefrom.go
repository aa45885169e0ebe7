package main

import (
	"fmt"

	"github.com/ctrkit/ctrkit/trainer/graph"
	"github.com/urfave/cli/v2"
)

// denseFromFlag is HugeCTR construct_from_json(include_dense_network=False)
// followed by the dense layers of another graph.
var denseFromFlag = &cli.StringFlag{Name: "dense-from", Usage: "take the dense network (every layer after the embeddings) from graph JSON `FILE`, " +
	"the data input and embeddings from --config/--model (HugeCTR construct_from_json(include_dense_network=False)); " +
	"--load-prefix then loads the embeddings' files only"}

// loadModel returns the model description the flags select: --config or
// --model, with --dense-from's dense network on its embeddings.
func loadModel(c *cli.Context) (*graph.Config, error) {
	cfg, err := loadBaseModel(c)
	if err != nil || !c.IsSet("dense-from") {
		return cfg, err
	}
	path := c.String("dense-from")
	d, err := graph.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--dense-from: %w", err)
	}
	if len(d.Graph.Layers) == 0 {
		return nil, fmt.Errorf("--dense-from %s: the graph has no dense layers", path)
	}
	return cfg.WithDense(d.Graph, path, cfg.Optimizer)
}

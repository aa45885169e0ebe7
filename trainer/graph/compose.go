package graph

import "fmt"

// SparseOnly is HugeCTR construct_from_json(file, include_dense_network=
// False): the config with its data input and sparse embeddings and no
// dense layers, for a new dense network on top (append to Graph.Layers,
// or WithDense). The solver, optimizer and reader sections stay. c is not
// changed.
func (c *Config) SparseOnly() *Config {
	g := *c.Graph
	g.Embeddings = append([]SparseEmbedding(nil), c.Graph.Embeddings...)
	g.Layers = nil
	out := *c
	out.Graph = &g
	return &out
}

// WithDense puts the dense network of dense (every layer after its
// embeddings) on top of c's input and embeddings: the embeddings of one
// graph, the dense network of another (HugeCTR construct_from_json(c,
// include_dense_network=False) followed by model.add of dense's layers).
// The dense layers must read tensors c defines (its label, dense input and
// embedding tops); the result is checked as a whole (Infer with opt, nil:
// the default optimizer) and an error names both sources. c is not
// changed.
func (c *Config) WithDense(dense *Graph, denseName string, opt *Optimizer) (*Config, error) {
	out := c.SparseOnly()
	out.Graph.Layers = append([]DenseLayer(nil), dense.Layers...)
	if opt == nil {
		opt = DefaultOptimizer()
	}
	g := *out.Graph // checked as Build sees it: with HugeCTR's automatic slices
	g.Layers = append([]DenseLayer(nil), g.Layers...)
	err := g.AutoSlice(opt)
	if err == nil {
		_, err = g.Infer(opt)
	}
	if err != nil {
		return nil, fmt.Errorf("the dense network of %s on this graph's input and embeddings: %w", denseName, err)
	}
	return out, nil
}

package main

import (
	"encoding/json"
	"io"
	"math"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/ctrkit/ctrkit/datagen"
	"github.com/ctrkit/ctrkit/trainer/graph"
)

// The --json objects of convert, gen, keyset and summary share the style of
// evaluate's, validate's, inspect's and bench's: snake_case keys, units in
// the names (bytes, seconds, samples_per_s), null for a figure that is not
// a number.

// jsonFlag is the --json flag of a command whose figures it prints.
func jsonFlag(what string) cli.Flag {
	return &cli.BoolFlag{Name: "json", Usage: "print one JSON object (" + what + ") instead of the text"}
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// num is a float64 that is null in JSON when it is NaN or infinite.
type num float64

func (x num) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
		return []byte("null"), nil
	}
	return json.Marshal(float64(x))
}

type convertJSON struct {
	Source        string  `json:"source"`
	SourceFormat  string  `json:"source_format"`
	Output        string  `json:"output"`
	OutputFormat  string  `json:"output_format"`
	Samples       int64   `json:"samples"`
	Seconds       num     `json:"seconds"`
	SamplesPerS   num     `json:"samples_per_s"`
	ReadWorkers   int     `json:"read_workers"`
	SlotSizeFile  *string `json:"slot_size_array_file"`
	KeyConvention string  `json:"key_convention"`
}

type genFileJSON struct {
	Path    string `json:"path"`
	Eval    bool   `json:"eval"`
	Samples int64  `json:"samples"`
	Bytes   int64  `json:"bytes"`
}

type genJSON struct {
	Format        string        `json:"format"`
	Source        string        `json:"source"`
	EvalSource    string        `json:"eval_source"`
	Seed          string        `json:"seed"`
	Samples       int64         `json:"samples"`
	Bytes         int64         `json:"bytes"`
	Seconds       num           `json:"seconds"`
	BytesPerS     num           `json:"bytes_per_s"`
	PlantedAUC    num           `json:"planted_auc"`
	PlantedCTR    num           `json:"planted_ctr"`
	KeyConvention string        `json:"key_convention"`
	Files         []genFileJSON `json:"files"`
}

func genResultJSON(res *datagen.Result) genJSON {
	p := &res.Params
	g := genJSON{Format: p.Format.String(), Source: p.Source, EvalSource: p.EvalSource, Seed: formatSeedText(p.Seed),
		Samples: res.Samples, Bytes: res.Bytes, Seconds: num(res.Elapsed.Seconds()), BytesPerS: num(res.MBps() * 1e6),
		PlantedAUC: num(res.PlantedAUC), PlantedCTR: num(res.CTR), KeyConvention: "slot_local", Files: []genFileJSON{}}
	if p.Format == datagen.Norm {
		g.KeyConvention = "global"
	}
	if res.Elapsed <= 0 {
		g.BytesPerS = num(math.NaN())
	}
	for _, f := range res.Files {
		g.Files = append(g.Files, genFileJSON(f))
	}
	return g
}

type keysetFileJSON struct {
	Path       string `json:"path"`
	UniqueKeys int64  `json:"unique_keys"`
	KeyType    string `json:"key_type"`
}

type keysetJSON struct {
	Source  string           `json:"source"`
	Keysets []keysetFileJSON `json:"keysets"`
}

type summaryLayerJSON struct {
	Index   int      `json:"index"`
	Type    string   `json:"type"`
	Bottom  []string `json:"bottom"`
	Top     []string `json:"top"`
	Output  []string `json:"output_shapes"`
	Params  int64    `json:"params"`
	Rows    int64    `json:"rows,omitempty"`
	VecSize int      `json:"embedding_vec_size,omitempty"`
}

type summaryJSON struct {
	Model           string             `json:"model_name"`
	Layers          []summaryLayerJSON `json:"layers"`
	DenseParams     int64              `json:"dense_params"`
	DenseBytes      int64              `json:"dense_bytes_f32"`
	EmbeddingParams int64              `json:"embedding_params"`
	EmbeddingBytes  int64              `json:"embedding_bytes_f32"`
}

// summaryOf is the --json form of summary: the layers (embeddings first)
// with their output shapes and parameter counts, and the totals. An
// inference error is returned after what was inferred.
func summaryOf(cfg *graph.Config) (summaryJSON, error) {
	g := cfg.Graph
	info, err := g.Infer(cfg.Optimizer)
	s := summaryJSON{Model: g.ModelName, Layers: []summaryLayerJSON{}, DenseParams: info.DenseParams, DenseBytes: 4 * info.DenseParams,
		EmbeddingParams: info.EmbeddingParams, EmbeddingBytes: 4 * info.EmbeddingParams}
	for i, e := range g.Embeddings {
		l := summaryLayerJSON{Index: 1 + i, Type: e.Type, Bottom: []string{e.Bottom}, Top: []string{e.Top}, Output: []string{}, VecSize: e.VecSize}
		if i < len(info.Embeddings) {
			ei := info.Embeddings[i]
			l.Output, l.Rows, l.Params = []string{ei.Out.String()}, ei.Rows, ei.Rows*int64(e.VecSize)
		}
		s.Layers = append(s.Layers, l)
	}
	for i, dl := range g.Layers {
		l := summaryLayerJSON{Index: 1 + len(g.Embeddings) + i, Type: dl.Type, Bottom: append([]string{}, dl.Bottom...),
			Top: append([]string{}, dl.Top...), Output: []string{}}
		if i < len(info.Layers) {
			for _, o := range info.Layers[i].Out {
				l.Output = append(l.Output, o.String())
			}
			l.Params = info.Layers[i].Params
		}
		s.Layers = append(s.Layers, l)
	}
	return s, err
}

// formatSeedText prints a seed as gen does (decimal, a string: JSON
// numbers lose 64-bit integers).
func formatSeedText(seed uint64) string { return strconv.FormatUint(seed, 10) }

package datagen

import (
	"encoding/json"
	"math"
	"path/filepath"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/formats/raw"
)

// create opens the format writer of one data file.
func (g *generator) create(path string) (formats.Writer, error) {
	switch g.p.Format {
	case Norm:
		check := norm.CheckSum
		if g.p.EffectiveCheckType() == CheckNone {
			check = norm.CheckNone
		}
		return norm.Create(path, &g.schema, norm.WriterOptions{Check: check})
	case Raw:
		l := raw.OneHot
		if g.p.EffectiveRawLayout() == RawMultiHot {
			l = raw.MultiHot
		}
		return raw.Create(path, &g.schema, l)
	case Parquet:
		return g.createParquet(path)
	}
	return CreateCriteo(path)
}

// ParamsFile is the name of the JSON record of a run's parameters, seed
// and planted AUC, written in the directory of Source.
const ParamsFile = "gen_params.json"

// Record is the content of gen_params.json.
type Record struct {
	Params
	FormatName       string   `json:"format"`
	CheckTypeName    string   `json:"check_type"`
	DistTypeName     string   `json:"dist_type"`
	PowerLawTypeName string   `json:"power_law_type"`
	EffectiveAlpha   float64  `json:"effective_alpha"`
	LabelModeName    string   `json:"label_mode"`
	RawLayoutName    string   `json:"raw_layout,omitempty"`
	SeedText         string   `json:"seed_text"`
	PlantedAUC       *float64 `json:"planted_auc,omitempty"`
	CTR              *float64 `json:"planted_ctr,omitempty"`
	// Files are the data files, relative to the directory of Source.
	Files []FileResult `json:"files"`
}

// writeIndex writes the file lists, Parquet metadata and gen_params.json.
func (g *generator) writeIndex(res *Result) error {
	p := g.p
	if p.Format != Raw {
		var train, eval []string
		for _, f := range res.Files {
			if f.Eval {
				eval = append(eval, f.Path)
			} else {
				train = append(train, f.Path)
			}
		}
		if err := formats.WriteFileList(p.Source, train); err != nil {
			return err
		}
		if err := formats.WriteFileList(p.EvalSource, eval); err != nil {
			return err
		}
		if p.Format == Parquet {
			if err := g.writeParquetMetadata(res); err != nil {
				return err
			}
		}
	}
	rec := Record{
		Params: *p, FormatName: p.Format.String(), CheckTypeName: p.EffectiveCheckType().String(),
		DistTypeName: p.DistType.String(), PowerLawTypeName: p.PowerLawType.String(),
		EffectiveAlpha: p.EffectiveAlpha(), LabelModeName: p.LabelMode.String(),
		SeedText: formatSeed(p.Seed),
	}
	dir := filepath.Dir(p.Source)
	for _, f := range res.Files {
		if rel, err := filepath.Rel(dir, f.Path); err == nil {
			f.Path = rel
		}
		rec.Files = append(rec.Files, f)
	}
	if len(rec.NNZArray) == 0 {
		rec.NNZArray = make([]int, p.NumSlot)
		for i := range rec.NNZArray {
			rec.NNZArray[i] = 1
		}
	}
	if p.Format == Raw {
		rec.RawLayoutName = p.EffectiveRawLayout().String()
	}
	if !math.IsNaN(res.PlantedAUC) {
		a, c := res.PlantedAUC, res.CTR
		rec.PlantedAUC, rec.CTR = &a, &c
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return formats.WriteFileAtomic(filepath.Join(filepath.Dir(p.Source), ParamsFile), append(data, '\n'))
}

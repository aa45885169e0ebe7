package datagen

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sync"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/norm"
	"github.com/ctrkit/ctrkit/formats/parquet"
	"github.com/ctrkit/ctrkit/formats/raw"
	"github.com/ctrkit/ctrkit/internal/atomicfile"
)

// create opens the format writer of one data file.
func (g *generator) create(path string) (formats.Writer, error) {
	switch g.p.Format {
	case Norm:
		w, err := norm.Create(path, &g.schema, norm.WriterOptions{Check: g.p.EffectiveCheckType(), Files: g.files})
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return w, nil
	case Raw:
		w, err := raw.CreateWith(g.files, path, &g.schema, g.p.EffectiveRawLayout())
		if err != nil {
			return nil, err
		}
		return w, nil
	case Parquet:
		return g.createParquet(path)
	}
	w, err := createCriteo(g.files, path)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// stage starts the Stages of the run: one per directory of Source and
// EvalSource (one when they share it).
func (g *generator) stage(o Output) error {
	p := g.p
	g.files = &stages{by: map[string]*atomicfile.Stage{}}
	so := atomicfile.StageOptions{Force: o.Force, NoSync: o.NoSync, Open: o.Open,
		Listed: formats.ListedFiles(filepath.Base(p.Source), filepath.Base(p.EvalSource))}
	so.Owned = func(rel string) bool { return g.owned(rel) }
	for _, src := range []string{p.Source, p.EvalSource} {
		root := filepath.Clean(filepath.Dir(src))
		if g.files.by[root] != nil {
			continue
		}
		st, err := atomicfile.NewStage(root, so)
		if err != nil {
			g.abort()
			return err
		}
		g.files.by[root] = st
		g.files.order = append(g.files.order, root)
	}
	return nil
}

// genName matches the data files a run writes.
var genName = regexp.MustCompile(`^(train|val)/gen_[0-9]+\.(data|parquet|txt)$`)

// owned reports whether rel, a file in the directory of Source or
// EvalSource, is one a generation run writes there.
func (g *generator) owned(rel string) bool {
	switch rel {
	case filepath.Base(g.p.Source), filepath.Base(g.p.EvalSource), filepath.Base(ParamsPath(*g.p)),
		"train/" + parquet.MetadataName, "val/" + parquet.MetadataName,
		"file_list.txt", "file_list_test.txt", "train_data.bin", "test_data.bin":
		return true
	}
	return genName.MatchString(rel)
}

func (g *generator) commit() error {
	for i, root := range g.files.order {
		if err := g.files.by[root].Commit(); err != nil {
			for _, r := range g.files.order[i+1:] {
				g.files.by[r].Abort()
			}
			return err
		}
	}
	return nil
}

func (g *generator) abort() {
	if g.files == nil {
		return
	}
	for _, root := range g.files.order {
		g.files.by[root].Abort()
	}
}

// stages creates each file in the Stage of its directory and remembers it
// (for its size).
type stages struct {
	by    map[string]*atomicfile.Stage // by root directory
	order []string
	mu    sync.Mutex // guards made
	made  map[string]*atomicfile.File
}

func (s *stages) CreateFile(final string) (*atomicfile.File, error) {
	for d := filepath.Dir(final); ; d = filepath.Dir(d) {
		if st := s.by[filepath.Clean(d)]; st != nil {
			f, err := st.CreateFile(final)
			if err == nil {
				s.mu.Lock()
				if s.made == nil {
					s.made = map[string]*atomicfile.File{}
				}
				s.made[final] = f
				s.mu.Unlock()
			}
			return f, err
		}
		if d == filepath.Dir(d) {
			return nil, fmt.Errorf("%s lies outside the output directories", final)
		}
	}
}

// stat returns the file info of the written (not yet visible) file final.
func (s *stages) stat(final string) (os.FileInfo, error) {
	s.mu.Lock()
	f := s.made[final]
	s.mu.Unlock()
	if f == nil {
		return nil, fmt.Errorf("%s was not written", final)
	}
	return f.Stat()
}

// ParamsFile is the name of the JSON record of a run's parameters, seed
// and planted AUC, written in the directory of Source.
const ParamsFile = "gen_params.json"

// ParamsPath is where a run records its parameters: ParamsFile in the
// dataset's directory (Norm, Parquet, Criteo: the directory is the
// dataset), or "<train file>.gen_params.json" beside a Raw file, so
// several Raw datasets can share a directory, each with its own record.
func ParamsPath(p Params) string {
	if p.Format == Raw {
		return p.Source + "." + ParamsFile
	}
	return filepath.Join(filepath.Dir(p.Source), ParamsFile)
}

// Record is the content of gen_params.json.
type Record struct {
	Params
	FormatName       string  `json:"format"`
	CheckTypeName    string  `json:"check_type"`
	DistTypeName     string  `json:"dist_type"`
	PowerLawTypeName string  `json:"power_law_type"`
	EffectiveAlpha   float64 `json:"effective_alpha"`
	LabelModeName    string  `json:"label_mode"`
	RawLayoutName    string  `json:"raw_layout,omitempty"`
	// KeyConvention is "global" (Norm: slot offsets added) or
	// "slot_local" (docs/sidecar.md).
	KeyConvention string   `json:"key_convention"`
	SeedText      string   `json:"seed_text"`
	PlantedAUC    *float64 `json:"planted_auc,omitempty"`
	CTR           *float64 `json:"planted_ctr,omitempty"`
	// PlantedAUCs and CTRs are those of every label column (each its own
	// hidden model) when label_dim > 1.
	PlantedAUCs []float64 `json:"planted_aucs,omitempty"`
	CTRs        []float64 `json:"planted_ctrs,omitempty"`
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
		if err := formats.WriteFileListTo(g.files, p.Source, train); err != nil {
			return err
		}
		if err := formats.WriteFileListTo(g.files, p.EvalSource, eval); err != nil {
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
		SeedText: formatSeed(p.Seed), KeyConvention: "slot_local",
	}
	if p.Format == Norm {
		rec.KeyConvention = "global"
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
	if len(res.PlantedAUCs) > 1 {
		rec.PlantedAUCs, rec.CTRs = res.PlantedAUCs, res.CTRs
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFileTo(g.files, ParamsPath(*p), append(data, '\n'))
}

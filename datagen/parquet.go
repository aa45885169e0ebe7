package datagen

import (
	"path/filepath"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/parquet"
)

// createParquet opens a Parquet data file: NVTabular column names (label,
// I1.., C1..), encoded as Params.ParquetWriter says (by default int64
// cats, snappy, one row group per 128Ki rows); a slot with nnz_array[s] >
// 1 is a list column.
func (g *generator) createParquet(path string) (formats.Writer, error) {
	o := g.p.ParquetWriter
	o.Files = g.files
	w, err := parquet.Create(path, &g.schema, o)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return w, nil
}

// writeParquetMetadata writes _metadata.json beside the train files and
// beside the eval files.
func (g *generator) writeParquetMetadata(res *Result) error {
	for _, eval := range []bool{false, true} {
		var stats []parquet.FileStat
		dir := ""
		for _, f := range res.Files {
			if f.Eval == eval {
				stats = append(stats, parquet.FileStat{FileName: filepath.Base(f.Path), NumRows: f.Samples})
				dir = filepath.Dir(f.Path)
			}
		}
		m := parquet.MetadataFor(&g.schema, stats)
		if err := parquet.WriteMetadataTo(g.files, filepath.Join(dir, parquet.MetadataName), m); err != nil {
			return err
		}
	}
	return nil
}

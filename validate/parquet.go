package validate

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/parquet"
)

// readerBatch is the batch size of reader-based checks.
const readerBatch = 4096

// parquet validates Parquet files one by one with the parquet package's
// reader: _metadata.json against each footer (row counts, col_name, column
// presence and types) when the file is opened, then every value. The
// reader stops at the first decoding error of a file (a null, a corrupt
// page), so that is reported and the next file checked; keys, nnz and
// label/dense values are checked here and all reported.
func (v *run) parquet(files []string) error {
	r := v.rep
	metaPath := filepath.Join(filepath.Dir(files[0]), parquet.MetadataName)
	meta, err := parquet.ReadMetadata(metaPath)
	if err != nil {
		r.addErr(metaPath, err, "; no file can be checked without it")
		return nil
	}
	// The schema: inferred from the first file that opens.
	var schema *formats.Schema
	for i, f := range files {
		rd, err := parquet.OpenFiles([]string{f}, meta, schema, parquet.Options{Options: formats.Options{BatchSize: readerBatch}, KeyType: v.spec.KeyType})
		if err != nil {
			r.addErr(f, err, "; file skipped")
			continue
		}
		if schema == nil {
			s := rd.Schema().Clone()
			for j := range s.Slots {
				s.Slots[j].MaxNNZ = 0
			}
			if err := v.spec.ForSlots(len(s.Slots)); err != nil {
				rd.Close()
				return fmt.Errorf("%w (cat columns of %s)", err, parquet.MetadataName)
			}
			schema = &s
			if i > 0 {
				// Reopen with the schema now fixed.
				rd.Close()
				if rd, err = parquet.OpenFiles([]string{f}, meta, schema, parquet.Options{Options: formats.Options{BatchSize: readerBatch}}); err != nil {
					r.addErr(f, err, "; file skipped")
					continue
				}
			}
		}
		v.readAll(f, rd)
		rd.Close()
		if st, err := os.Stat(f); err == nil {
			v.progress(st.Size())
		}
	}
	// Files in the metadata that the list does not name are worth a note.
	listed := map[string]bool{}
	for _, f := range files {
		listed[filepath.Base(f)] = true
	}
	for _, fs := range meta.FileStats {
		if !listed[filepath.Base(fs.FileName)] && len(files) == r.Files {
			v.note("%s lists %q, which the file list does not name", parquet.MetadataName, fs.FileName)
		}
	}
	return nil
}

// readAll reads rd to its end, checking values; the first read error is
// reported and ends the file.
func (v *run) readAll(file string, rd formats.Reader) {
	s := rd.Schema()
	b, err := formats.NewBatch(s, readerBatch, nil)
	if err != nil {
		v.rep.add(KindIO, file, -1, -1, "%v", err)
		return
	}
	defer b.Free()
	v.rep.Checked++
	// One value of an array flag means every slot (dataset.PerSlot).
	var sizes []int64
	var maxNNZ []int
	if len(v.spec.SlotSizeArray) > 0 {
		if sizes, err = dataset.PerSlot("--slot-size-array", v.spec.SlotSizeArray, s.NumSlots()); err != nil {
			v.rep.add(KindIO, file, -1, -1, "%v", err)
			return
		}
	}
	if len(v.spec.NNZ) > 0 {
		if maxNNZ, err = dataset.PerSlot("--nnz-array", v.spec.NNZ, s.NumSlots()); err != nil {
			v.rep.add(KindIO, file, -1, -1, "%v", err)
			return
		}
	}
	rec := int64(0)
	for {
		n, err := rd.Read(b)
		if n > 0 {
			v.checkValues(file, b, rec, &layout{}, sizes, maxNNZ)
			rec += int64(n)
			v.rep.Samples += int64(n)
		}
		if err == io.EOF {
			return
		}
		if err != nil {
			v.rep.addErr(file, err, "; the rest of the file is not checked (the reader stops at its first error)")
			return
		}
	}
}

// criteo validates Criteo text through its reader.
func (v *run) criteo(path string) error {
	d, err := dataset.Resolve(path, v.spec)
	if err != nil {
		return err
	}
	v.rep.Notes = append(v.rep.Notes, d.Notes...)
	rd, err := d.Open(formats.Options{BatchSize: readerBatch})
	if err != nil {
		return err
	}
	defer rd.Close()
	v.readAll(path, rd)
	v.progress(d.Bytes)
	return nil
}

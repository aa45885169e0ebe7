package parquet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/internal/atomicfile"
)

// MetadataName is the name of the metadata file beside the data files.
const MetadataName = "_metadata.json"

// FileListName is the name of the file list the dataset writer emits.
const FileListName = "_file_list.txt"

// maxMetadataBytes bounds how much of a _metadata.json is read.
const maxMetadataBytes = 256 << 20

// Metadata is the content of _metadata.json (see the package doc).
type Metadata struct {
	FileStats []FileStat `json:"file_stats"`
	Labels    []Column   `json:"labels"`
	Conts     []Column   `json:"conts"`
	Cats      []Column   `json:"cats"`
}

// FileStat is one file_stats entry: a data file and its row count.
type FileStat struct {
	FileName string `json:"file_name"`
	NumRows  int64  `json:"num_rows"`
}

// Column selects the column at Index (0-based position among the top-level
// fields of the file schema), expected to be named ColName.
type Column struct {
	ColName string `json:"col_name"`
	Index   int    `json:"index"`
}

// ParseMetadata parses and checks the text of a _metadata.json: every index
// and num_rows must be ≥ 0 and no index may be selected twice (in any group).
// Each group is returned sorted ascending by index, as HugeCTR sorts it.
// Errors are *formats.Error values with Format "metadata" wrapping
// formats.ErrMetadata (Path is empty).
func ParseMetadata(data []byte) (*Metadata, error) {
	var m Metadata
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&m); err != nil {
		return nil, metaErr("", "%v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, metaErr("", "trailing data after the JSON object")
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return &m, nil
}

func metaErr(path, format string, args ...any) *formats.Error {
	return formats.Errorf("metadata", path, -1, -1, formats.ErrMetadata, format, args...)
}

func (m *Metadata) check() error {
	for i, f := range m.FileStats {
		if f.NumRows < 0 {
			return metaErr("", "file_stats[%d] (%q): num_rows %d is negative", i, f.FileName, f.NumRows)
		}
		if f.FileName == "" {
			return metaErr("", "file_stats[%d]: empty file_name", i)
		}
	}
	seen := map[int]string{}
	for _, g := range []struct {
		name string
		cols []Column
	}{{"labels", m.Labels}, {"conts", m.Conts}, {"cats", m.Cats}} {
		for i, c := range g.cols {
			if c.Index < 0 {
				return metaErr("", "%s[%d] (%q): index %d is negative", g.name, i, c.ColName, c.Index)
			}
			if prev, ok := seen[c.Index]; ok {
				return metaErr("", "%s[%d] (%q): index %d already selected by %s", g.name, i, c.ColName, c.Index, prev)
			}
			seen[c.Index] = fmt.Sprintf("%s %q", g.name, c.ColName)
		}
		sort.SliceStable(g.cols, func(a, b int) bool { return g.cols[a].Index < g.cols[b].Index })
	}
	return nil
}

// ReadMetadata reads and parses a _metadata.json file.
func ReadMetadata(path string) (*Metadata, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &formats.Error{Format: "metadata", Path: path, Offset: -1, Record: -1, Op: "open", Err: err}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxMetadataBytes+1))
	if err != nil {
		return nil, &formats.Error{Format: "metadata", Path: path, Offset: -1, Record: -1, Op: "read", Err: err}
	}
	if len(data) > maxMetadataBytes {
		return nil, metaErr(path, "larger than %d bytes", maxMetadataBytes)
	}
	m, err := ParseMetadata(data)
	if err != nil {
		err.(*formats.Error).Path = path
		return nil, err
	}
	return m, nil
}

// Marshal returns the JSON text of m in the layout NVTabular writes.
func (m *Metadata) Marshal() ([]byte, error) {
	c := *m
	for _, p := range []*[]Column{&c.Labels, &c.Conts, &c.Cats} {
		if *p == nil {
			*p = []Column{}
		}
	}
	if c.FileStats == nil {
		c.FileStats = []FileStat{}
	}
	data, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// WriteMetadata checks m and writes it to path atomically.
func WriteMetadata(path string, m *Metadata) error { return WriteMetadataTo(nil, path, m) }

// WriteMetadataTo checks m and writes it to path as a file of c (nil:
// atomicfile.Direct).
func WriteMetadataTo(files atomicfile.Creator, path string, m *Metadata) error {
	c := *m
	c.Labels = append([]Column(nil), m.Labels...)
	c.Conts = append([]Column(nil), m.Conts...)
	c.Cats = append([]Column(nil), m.Cats...)
	if err := c.check(); err != nil {
		err.(*formats.Error).Path = path
		return err
	}
	data, err := c.Marshal()
	if err != nil {
		return fmt.Errorf("encoding %s: %w", path, err)
	}
	return atomicfile.WriteFileTo(files, path, data)
}

// MetadataFor returns the metadata of files written by Writer for schema s:
// label columns first, then I1..In, then C1..Cm, indexed in that order.
func MetadataFor(s *formats.Schema, stats []FileStat) *Metadata {
	m := &Metadata{FileStats: append([]FileStat{}, stats...), Labels: []Column{}, Conts: []Column{}, Cats: []Column{}}
	idx := 0
	for i := 0; i < s.LabelDim; i++ {
		m.Labels = append(m.Labels, Column{ColName: labelName(i), Index: idx})
		idx++
	}
	for i := 0; i < s.DenseDim; i++ {
		m.Conts = append(m.Conts, Column{ColName: fmt.Sprintf("I%d", i+1), Index: idx})
		idx++
	}
	for i := range s.Slots {
		m.Cats = append(m.Cats, Column{ColName: fmt.Sprintf("C%d", i+1), Index: idx})
		idx++
	}
	return m
}

func labelName(i int) string {
	if i == 0 {
		return "label"
	}
	return fmt.Sprintf("label%d", i)
}

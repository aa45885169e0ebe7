package model

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/ctrkit/ctrkit/trainer/layers"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// Files are the paths of one snapshot (SPEC §7).
type Files struct {
	Dense, DenseOpt   string
	Sparse, SparseOpt []string
}

// SnapshotFiles returns HugeCTR's names for a snapshot of a model with n
// embeddings: prefix is concatenated verbatim ("" gives "_dense_1000.model").
func SnapshotFiles(prefix string, iter int64, n int) Files {
	f := Files{Dense: fmt.Sprintf("%s_dense_%d.model", prefix, iter), DenseOpt: fmt.Sprintf("%s_opt_dense_%d.model", prefix, iter)}
	for i := range n {
		f.Sparse = append(f.Sparse, fmt.Sprintf("%s%d_sparse_%d.model", prefix, i, iter))
		f.SparseOpt = append(f.SparseOpt, fmt.Sprintf("%s%d_opt_sparse_%d.model", prefix, i, iter))
	}
	return f
}

// CheckSave reports, before any training, what would make Save(prefix, …)
// fail: the prefix's directory cannot be created or written (checked by
// the rank that writes: rank 0 of a group), or an embedding cannot produce
// its model files. Fit and Train call it when they will save.
func (m *Model) CheckSave(prefix string) error {
	if err := m.checkSaveDir(prefix); err != nil {
		return err
	}
	return m.checkSaveEmbeddings()
}

// checkSaveDir is CheckSave's check of the prefix's directory, made by the
// rank that writes (rank 0; every rank of a model alone).
func (m *Model) checkSaveDir(prefix string) error {
	if !m.leads() {
		return nil
	}
	dir := filepath.Dir(prefix + "_")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("snapshot prefix %q: %w", prefix, err)
	}
	f, err := os.CreateTemp(dir, ".ctrkit-write-check-*")
	if err != nil {
		return fmt.Errorf("snapshot prefix %q: directory %s is not writable: %w", prefix, dir, err)
	}
	name := f.Name()
	f.Close()
	if err := os.Remove(name); err != nil {
		return fmt.Errorf("snapshot prefix %q: %w", prefix, err)
	}
	return nil
}

// checkSaveEmbeddings reports an embedding that cannot produce its model
// files.
func (m *Model) checkSaveEmbeddings() error {
	for i, e := range m.embs {
		switch e.layer.Cfg.Kind {
		case layers.DistributedHash:
		case layers.LocalizedHash:
			if e.layer.RowSlots.IsZero() {
				return fmt.Errorf("embedding %d (%s): no slot record for its slot_id file", i, e.g.Top)
			}
		case layers.LocalizedOneHot:
			if len(e.layer.Cfg.SlotSizes) != e.layer.Cfg.Slots {
				return fmt.Errorf("embedding %d (%s): no slot sizes for its slot_id file", i, e.g.Top)
			}
		default:
			return fmt.Errorf("%w: saving embedding %d (%s) of kind %d", ErrUnsupported, i, e.g.Top, e.layer.Cfg.Kind)
		}
	}
	return nil
}

func f32bytes(dst []byte, v []float32) []byte {
	for _, x := range v {
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(x))
	}
	return dst
}

func (m *Model) download(t tensor.Tensor) ([]float32, error) {
	v := make([]float32, t.Len())
	return v, m.be.Download(v, t)
}

// SaveFiles writes a snapshot to the given paths (any empty path is
// skipped), each file synced and renamed into place, without a manifest:
// HugeCTR's files only (Save writes the committed unit).
func (m *Model) SaveFiles(f Files) error { return m.saveFiles(f, nil) }

// saveFiles is SaveFiles; rec, when not nil, records every file written.
// Every rank of a group calls it; rank 0 writes (parallel_files.go).
func (m *Model) saveFiles(f Files, rec *recorder) error {
	for _, e := range m.embs {
		e.opt.Flush()
	}
	var err error
	if m.leads() {
		err = m.saveDense(f, rec)
	}
	if err := m.agree(err); err != nil {
		return err
	}
	for i, e := range m.embs {
		if i < len(f.Sparse) && f.Sparse[i] != "" {
			opt := ""
			if i < len(f.SparseOpt) {
				opt = f.SparseOpt[i]
			}
			if err := m.saveSparse(e, f.Sparse[i], opt, rec); err != nil {
				return fmt.Errorf("writing embedding %d: %w", i, err)
			}
		}
	}
	return nil
}

// saveDense writes the dense files of f (those not "").
func (m *Model) saveDense(f Files, rec *recorder) error {
	if f.Dense != "" {
		var buf []byte
		for _, p := range m.params {
			v, err := m.download(p.Value)
			if err != nil {
				return err
			}
			buf = f32bytes(buf, v)
		}
		if err := rec.write(f.Dense, buf); err != nil {
			return fmt.Errorf("writing dense model: %w", err)
		}
	}
	if bns := m.batchNorms(); f.Dense != "" && len(bns) > 0 {
		buf, err := m.ntpBytes(bns)
		if err != nil {
			return err
		}
		if err := rec.write(NTPFile(f.Dense), buf); err != nil {
			return fmt.Errorf("writing BatchNorm running statistics: %w", err)
		}
	}
	if f.DenseOpt != "" {
		buf, err := m.denseOptBytes()
		if err != nil {
			return err
		}
		if err := rec.write(f.DenseOpt, buf); err != nil {
			return fmt.Errorf("writing dense optimizer state: %w", err)
		}
	}
	return nil
}

func (m *Model) denseOptBytes() ([]byte, error) {
	var buf []byte
	for state := range 2 {
		for i := range m.opt.NumDense() {
			s1, s2 := m.opt.DenseState(i)
			t := [2]tensor.Tensor{s1, s2}[state]
			if t.IsZero() {
				continue
			}
			v, err := m.download(t)
			if err != nil {
				return nil, err
			}
			buf = f32bytes(buf, v)
		}
	}
	return buf, nil
}

// rowsKeys returns the table's used rows and their keys in ascending key
// order: the one row order of a model file whatever the rank count and the
// order the keys were first seen in (HugeCTR's loader takes any order).
func (m *Model) rowsKeys(e *embedding) (rows []int32, keys []int64, err error) {
	l := e.layer
	if l.Cfg.Kind == layers.LocalizedOneHot { // every local row; key = its global row (ascending)
		g := l.GlobalRows()
		rows, keys = make([]int32, len(g)), append([]int64(nil), g...)
		for i := range g {
			rows[i] = int32(i)
		}
		return rows, keys, nil
	}
	hk := make([]int64, l.Hash.Keys.Len())
	hr := make([]int32, l.Hash.Rows.Len())
	if err := m.be.Download(hk, l.Hash.Keys); err != nil {
		return nil, nil, err
	}
	if err := m.be.Download(hr, l.Hash.Rows); err != nil {
		return nil, nil, err
	}
	type kr struct {
		k int64
		r int32
	}
	var used []kr
	for i, k := range hk {
		if k != tensor.EmptyKey {
			used = append(used, kr{k, hr[i]})
		}
	}
	sort.Slice(used, func(a, b int) bool { return used[a].k < used[b].k })
	for _, u := range used {
		rows, keys = append(rows, u.r), append(keys, u.k)
	}
	return rows, keys, nil
}

// slotOf maps a OneHot key (a global row) to its slot from the slot sizes.
func slotOf(sizes []int64, key int64) int64 {
	var off int64
	for s, n := range sizes {
		if key < off+n {
			return int64(s)
		}
		off += n
	}
	return -1
}

// slotIDs returns the slot_id values of a Localized embedding for rows:
// the slot each row was inserted from (LocalizedHash: recorded by the
// layer; OneHot: the slot whose key range holds the row).
func (m *Model) slotIDs(e *embedding, rows []int32, keys []int64) ([]int64, error) {
	out := make([]int64, len(keys))
	if e.layer.Cfg.Kind == layers.LocalizedOneHot {
		for i, k := range keys {
			if out[i] = slotOf(e.layer.Cfg.SlotSizes, k); out[i] < 0 {
				return nil, fmt.Errorf("key %d beyond the slot sizes", k)
			}
		}
		return out, nil
	}
	rs := make([]int32, e.layer.RowSlots.Len())
	if err := m.be.Download(rs, e.layer.RowSlots); err != nil {
		return nil, err
	}
	for i, r := range rows {
		if rs[r] < 0 { // every inserted or loaded row has its slot
			return nil, fmt.Errorf("key %d (row %d) has no slot recorded", keys[i], r)
		}
		out[i] = int64(rs[r])
	}
	return out, nil
}

// localized reports whether e writes and reads a slot_id file.
func localized(e *embedding) bool {
	return e.layer.Cfg.Kind == layers.LocalizedHash || e.layer.Cfg.Kind == layers.LocalizedOneHot
}

// saveSparse writes embedding e's sparse directory (and its optimizer
// state to optPath when not ""). A sharded embedding's rows are gathered on
// rank 0, which writes; every rank calls it (parallel_files.go).
func (m *Model) saveSparse(e *embedding, dir, optPath string, rec *recorder) error {
	_, w := shardOf(e)
	if w < 2 && !m.leads() { // whole on every rank: rank 0's rows
		return m.agree(nil)
	}
	rows, err := m.localRows(e, optPath != "")
	if w > 1 {
		if err = m.agree(err); err != nil {
			return err
		}
		if rows, err = gatherRows(m.rankComm(), rows, localized(e)); err != nil {
			return err
		}
	}
	if err == nil && m.leads() {
		files, opt := rows.files()
		if err = rec.writeDir(dir, files); err == nil && optPath != "" {
			err = rec.write(optPath, opt)
		}
	}
	return m.agree(err)
}

// LoadError is a model file that does not fit the model.
type LoadError struct {
	Path   string
	Detail string
}

func (e *LoadError) Error() string { return e.Path + ": " + e.Detail }

func readF32(path string, want int) ([]float32, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(data) != 4*want {
		return nil, &LoadError{path, fmt.Sprintf("%d bytes, the model needs %d (%d float32)", len(data), 4*want, want)}
	}
	v := make([]float32, want)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return v, nil
}

// LoadFiles loads the given files into the model (an empty path is
// skipped). Sizes are checked against the model before anything changes.
func (m *Model) LoadFiles(f Files) error {
	if f.Dense != "" {
		n := 0
		for _, p := range m.params {
			n += p.Value.Len()
		}
		v, err := readF32(f.Dense, n)
		if err != nil {
			return err
		}
		stats, err := m.readNTP(NTPFile(f.Dense))
		if err != nil {
			return err
		}
		for _, p := range m.params {
			m.be.Upload(p.Value, v[:p.Value.Len()])
			v = v[p.Value.Len():]
		}
		m.refreshHalf() // the half operand copies follow the loaded masters
		for i, l := range m.batchNorms() {
			m.be.Upload(l.RunMean, stats[2*i])
			m.be.Upload(l.RunVar, stats[2*i+1])
		}
	}
	if f.DenseOpt != "" {
		var ts []tensor.Tensor
		for state := range 2 {
			for i := range m.opt.NumDense() {
				s1, s2 := m.opt.DenseState(i)
				if t := [2]tensor.Tensor{s1, s2}[state]; !t.IsZero() {
					ts = append(ts, t)
				}
			}
		}
		n := 0
		for _, t := range ts {
			n += t.Len()
		}
		v, err := readF32(f.DenseOpt, n)
		if err != nil {
			return err
		}
		for _, t := range ts {
			m.be.Upload(t, v[:t.Len()])
			v = v[t.Len():]
		}
	}
	for i, e := range m.embs {
		if i < len(f.Sparse) && f.Sparse[i] != "" {
			opt := ""
			if i < len(f.SparseOpt) {
				opt = f.SparseOpt[i]
			}
			if err := m.loadSparse(e, f.Sparse[i], opt); err != nil {
				return err
			}
		}
	}
	return m.be.Sync()
}

// loadSparse reads embedding e's sparse directory (and optimizer state
// from optPath when not "") and keeps the rows this rank owns (all of them
// for a model alone). Every file is read and checked before the model
// changes.
func (m *Model) loadSparse(e *embedding, dir, optPath string) error {
	kpath, epath := filepath.Join(dir, "key"), filepath.Join(dir, "emb_vector")
	kd, err := os.ReadFile(kpath)
	if err != nil {
		return err
	}
	if len(kd)%8 != 0 {
		return &LoadError{kpath, fmt.Sprintf("%d bytes is not a whole number of int64 keys", len(kd))}
	}
	n, vec := len(kd)/8, e.g.VecSize
	rank, world := shardOf(e)
	if world < 2 && n > e.layer.Table.Rows() { // before reading the vectors
		return &LoadError{kpath, fmt.Sprintf("%d keys for a table of %d rows", n, e.layer.Table.Rows())}
	}
	keys := make([]int64, n)
	for i := range keys {
		keys[i] = int64(binary.LittleEndian.Uint64(kd[8*i:]))
	}
	kind := e.layer.Cfg.Kind
	if kind == layers.LocalizedOneHot { // the key is the global row
		rows := oneHotRows(e)
		for i, k := range keys {
			if k < 0 || k >= rows {
				return &LoadError{kpath, fmt.Sprintf("key %d (index %d) beyond the table's %d rows", k, i, rows)}
			}
		}
	}
	var slots []int64
	if localized(e) {
		if slots, err = m.readSlotIDs(e, filepath.Join(dir, "slot_id"), keys); err != nil {
			return err
		}
	}
	// The rows this rank owns.
	keep := make([]int, 0, n)
	for i, k := range keys {
		var s int64
		if slots != nil {
			s = slots[i]
		}
		if ownsRow(kind, k, s, rank, world) {
			keep = append(keep, i)
		}
	}
	if len(keep) > e.layer.Table.Rows() {
		return &LoadError{kpath, fmt.Sprintf("%d of its %d keys belong to rank %d of %d, whose table has %d rows", len(keep), n, rank, world, e.layer.Table.Rows())}
	}
	// This rank's rows of the vectors and optimizer states: [len(keep), vec]
	// each, read in file order (the whole files are checked, only these
	// rows kept in memory).
	vecs, err := readRows(epath, 1, n, vec, keep)
	if err != nil {
		return err
	}
	emb := vecs[0]
	var states [][]float32
	if optPath != "" {
		s1, s2 := e.opt.EmbeddingState(0)
		blocks := 0
		for _, t := range []tensor.Tensor{s1, s2} {
			if !t.IsZero() {
				blocks++
			}
		}
		if states, err = readRows(optPath, blocks, n, vec, keep); err != nil {
			return err
		}
	}
	owned := make([]int64, len(keep))
	for j, i := range keep {
		owned[j] = keys[i]
	}
	rows := make([]int32, len(keep))
	if kind == layers.LocalizedOneHot {
		for j, k := range owned {
			rows[j] = oneHotRow(e, k)
		}
	} else if len(keep) > 0 {
		kt := m.be.Alloc(tensor.Int64, len(keep))
		rt := m.be.Alloc(tensor.Int32, len(keep))
		m.be.Upload(kt, owned)
		m.be.HashLookup(e.layer.Hash, kt, rt, true)
		err := m.be.Download(rows, rt)
		m.be.Free(kt)
		m.be.Free(rt)
		if err != nil {
			return fmt.Errorf("%s: %w", kpath, err)
		}
	}
	put := func(t tensor.Tensor, src []float32) error {
		v, err := m.download(t)
		if err != nil {
			return err
		}
		for j, r := range rows {
			copy(v[int(r)*vec:int(r)*vec+vec], src[j*vec:j*vec+vec])
		}
		m.be.Upload(t, v)
		return nil
	}
	if slots != nil && !e.layer.RowSlots.IsZero() {
		rs := make([]int32, e.layer.RowSlots.Len())
		if err := m.be.Download(rs, e.layer.RowSlots); err != nil {
			return err
		}
		for j, r := range rows {
			rs[r] = int32(slots[keep[j]])
		}
		m.be.Upload(e.layer.RowSlots, rs)
	}
	if err := put(e.layer.Table, emb); err != nil {
		return err
	}
	if optPath == "" {
		return nil
	}
	s1, s2 := e.opt.EmbeddingState(0)
	j := 0
	for _, t := range []tensor.Tensor{s1, s2} {
		if t.IsZero() {
			continue
		}
		if err := put(t, states[j]); err != nil {
			return err
		}
		j++
	}
	return nil
}

// readRows reads rows idx (ascending indices) of each of blocks blocks of
// [n, vec] float32 values in the file at path: out[b] is [len(idx), vec].
// The file must hold exactly blocks·n·vec values; it is read once, in
// order, and only the rows asked for are kept.
func readRows(path string, blocks, n, vec int, idx []int) ([][]float32, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	want := int64(blocks) * int64(n) * int64(vec)
	if st.Size() != 4*want {
		return nil, &LoadError{path, fmt.Sprintf("%d bytes, the model needs %d (%d float32)", st.Size(), 4*want, want)}
	}
	br := bufio.NewReaderSize(f, 1<<20)
	row := make([]byte, 4*vec)
	out := make([][]float32, blocks)
	for b := range out {
		out[b] = make([]float32, 0, len(idx)*vec)
		next := 0
		for i := range n {
			if next < len(idx) && idx[next] == i {
				if _, err := io.ReadFull(br, row); err != nil {
					return nil, fmt.Errorf("%s: %w", path, err)
				}
				for j := range vec {
					out[b] = append(out[b], math.Float32frombits(binary.LittleEndian.Uint32(row[4*j:])))
				}
				next++
			} else if _, err := br.Discard(len(row)); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
		}
	}
	return out, nil
}

// readSlotIDs reads a Localized embedding's slot_id file (uint64 per key);
// OneHot keys imply their slot, which the file must agree with.
func (m *Model) readSlotIDs(e *embedding, path string, keys []int64) ([]int64, error) {
	d, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &LoadError{path, "missing: a Localized embedding's model directory holds key, emb_vector and slot_id"}
		}
		return nil, err
	}
	if len(d) != 8*len(keys) {
		return nil, &LoadError{path, fmt.Sprintf("%d bytes for %d keys (uint64 each)", len(d), len(keys))}
	}
	slots := e.layer.Cfg.Slots
	ids := make([]int64, len(keys))
	for i := range keys {
		s := binary.LittleEndian.Uint64(d[8*i:])
		if s >= uint64(slots) {
			return nil, &LoadError{path, fmt.Sprintf("slot %d of key index %d: the embedding has %d slots", s, i, slots)}
		}
		ids[i] = int64(s)
		if e.layer.Cfg.Kind == layers.LocalizedOneHot {
			if want := slotOf(e.layer.Cfg.SlotSizes, keys[i]); want != int64(s) {
				return nil, &LoadError{path, fmt.Sprintf("slot %d of key index %d: the key lies in slot %d", s, i, want)}
			}
		}
	}
	return ids, nil
}

// NTPFile is HugeCTR's file of non-trainable parameters beside a dense
// model file: dense + ".ntp.json" (BatchNorm running mean and variance).
func NTPFile(dense string) string { return dense + ".ntp.json" }

// batchNorms returns the BatchNorm layers in graph order.
func (m *Model) batchNorms() []*layers.BatchNorm {
	var bns []*layers.BatchNorm
	for _, l := range m.dense {
		if bn, ok := l.(*layers.BatchNorm); ok {
			bns = append(bns, bn)
		}
	}
	return bns
}

// ntpBytes renders the running statistics in HugeCTR's ntp.json layout,
// each value as the shortest decimal that reads back as the same float32
// (HugeCTR's std::to_string keeps six decimals); non-finite values, which
// JSON cannot hold as numbers, are the strings "nan", "inf", "-inf".
func (m *Model) ntpBytes(bns []*layers.BatchNorm) ([]byte, error) {
	b := []byte("{\n  \"layers\": [\n")
	list := func(name string, t tensor.Tensor, last bool) error {
		v, err := m.download(t)
		if err != nil {
			return err
		}
		b = append(b, "      \""+name+"\": ["...)
		for i, x := range v {
			if i > 0 {
				b = append(b, ", "...)
			}
			switch f := float64(x); {
			case math.IsNaN(f):
				b = append(b, `"nan"`...)
			case math.IsInf(f, 1):
				b = append(b, `"inf"`...)
			case math.IsInf(f, -1):
				b = append(b, `"-inf"`...)
			default:
				b = strconv.AppendFloat(b, f, 'g', -1, 32)
			}
		}
		b = append(b, ']')
		if !last {
			b = append(b, ',')
		}
		b = append(b, '\n')
		return nil
	}
	for i, l := range bns {
		b = append(b, "    {\n      \"type\": \"BatchNorm\",\n"...)
		if err := list("mean", l.RunMean, false); err != nil {
			return nil, err
		}
		if err := list("var", l.RunVar, true); err != nil {
			return nil, err
		}
		b = append(b, "    }"...)
		if i+1 < len(bns) {
			b = append(b, ',')
		}
		b = append(b, '\n')
	}
	return append(b, "  ]\n}\n"...), nil
}

// readNTP reads the running statistics of the model's BatchNorm layers
// (mean then variance per layer) from an ntp.json file; a model without
// BatchNorm reads nothing.
func (m *Model) readNTP(path string) ([][]float32, error) {
	bns := m.batchNorms()
	if len(bns) == 0 {
		return nil, nil
	}
	values := 0
	for _, l := range bns {
		values += 2 * l.RunMean.Len()
	}
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &LoadError{path, fmt.Sprintf("missing: the running mean and variance of the model's %d BatchNorm layers (HugeCTR writes them beside the dense file)", len(bns))}
		}
		return nil, err
	}
	if limit := int64(1<<16 + 64*values); st.Size() > limit {
		return nil, &LoadError{path, fmt.Sprintf("%d bytes is more than %d BatchNorm values can take", st.Size(), values)}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Layers []struct {
			Type string            `json:"type"`
			Mean []json.RawMessage `json:"mean"`
			Var  []json.RawMessage `json:"var"`
		} `json:"layers"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, &LoadError{path, err.Error()}
	}
	if len(doc.Layers) != len(bns) {
		return nil, &LoadError{path, fmt.Sprintf("%d layers, the model has %d BatchNorm layers", len(doc.Layers), len(bns))}
	}
	var out [][]float32
	for i, l := range doc.Layers {
		if l.Type != "BatchNorm" {
			return nil, &LoadError{path, fmt.Sprintf("layers[%d]: type %q, want BatchNorm", i, l.Type)}
		}
		n := bns[i].RunMean.Len()
		for _, c := range []struct {
			key string
			raw []json.RawMessage
		}{{"mean", l.Mean}, {"var", l.Var}} {
			if len(c.raw) != n {
				return nil, &LoadError{path, fmt.Sprintf("layers[%d].%s: %d values, the layer has %d features", i, c.key, len(c.raw), n)}
			}
			v := make([]float32, n)
			for j, r := range c.raw {
				x, err := ntpValue(r)
				if err != nil {
					return nil, &LoadError{path, fmt.Sprintf("layers[%d].%s[%d]: %v", i, c.key, j, err)}
				}
				v[j] = x
			}
			out = append(out, v)
		}
	}
	return out, nil
}

// ntpValue parses one ntp.json value: a number or "nan", "inf", "-inf".
func ntpValue(r json.RawMessage) (float32, error) {
	var s string
	if json.Unmarshal(r, &s) == nil {
		switch strings.ToLower(s) {
		case "nan", "-nan":
			return float32(math.NaN()), nil
		case "inf":
			return float32(math.Inf(1)), nil
		case "-inf":
			return float32(math.Inf(-1)), nil
		}
		return 0, fmt.Errorf("%q is not a number", s)
	}
	x, err := strconv.ParseFloat(string(r), 32)
	if err != nil {
		return 0, fmt.Errorf("%s is not a number", r)
	}
	return float32(x), nil
}

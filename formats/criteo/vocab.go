package criteo

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"runtime"
	"slices"

	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/internal/atomicfile"
)

// Vocabulary ids of every slot.
const (
	// IDMissing is the id of an empty field.
	IDMissing = 0
	// IDRare is the id shared by the values seen fewer than MinCount times
	// (and by values never seen while building).
	IDRare = 1
	// firstFrequent is the id of a slot's smallest frequent value.
	firstFrequent = 2
)

// DefaultMinCount is HugeCTR's preprocessing threshold: values seen fewer
// than 6 times share the rare id.
const DefaultMinCount = 6

// DefaultMemoryBudget is VocabOptions.MemoryBudget when zero.
const DefaultMemoryBudget = 1 << 30

// MinMemoryBudget is the smallest VocabOptions.MemoryBudget accepted.
const MinMemoryBudget = 1 << 20

// VocabOptions are the options of BuildVocab.
type VocabOptions struct {
	// Layout describes the text (SkipBad included).
	Layout
	// MinCount is the number of occurrences a value needs for its own id
	// (default DefaultMinCount).
	MinCount int
	// MemoryBudget bounds the bytes the counting holds (default
	// DefaultMemoryBudget, at least MinMemoryBudget); see the package doc.
	MemoryBudget int64
	// TempDir holds the spilled runs (default os.TempDir()).
	TempDir string
	// Workers parse in parallel (default GOMAXPROCS).
	Workers int
}

// Validate reports invalid options.
func (o *VocabOptions) Validate() error {
	if err := o.Layout.Validate(); err != nil {
		return err
	}
	if o.MinCount < 0 {
		return fmt.Errorf("negative min count %d", o.MinCount)
	}
	if o.MemoryBudget != 0 && o.MemoryBudget < MinMemoryBudget {
		return fmt.Errorf("memory budget %d below the minimum %d", o.MemoryBudget, MinMemoryBudget)
	}
	return nil
}

// VocabStats describes a BuildVocab run.
type VocabStats struct {
	Stats
	// Distinct is the number of distinct (slot, value) pairs seen.
	Distinct int64
	// Frequent is the number of values that got their own id.
	Frequent int64
	// Runs is the number of sorted runs spilled to disk (0: all counts
	// fitted in memory).
	Runs int
	// PeakBytes is the peak of the bytes held by the counting: parse
	// buffers (worst case), hash table, run buffers. It stays within
	// MemoryBudget.
	PeakBytes int64
}

// Vocab maps the categorical values of each slot to dense ids: IDMissing,
// IDRare, then 2, 3, … for the frequent values in ascending value order. It
// holds one sorted []uint64 per slot and a hash index of int32 positions:
// 14–20 bytes per frequent value. A Vocab is immutable and safe for
// concurrent use.
type Vocab struct {
	minCount int
	vals     [][]uint64 // per slot, strictly ascending, never Missing
	index    [][]int32  // per slot: open-addressing table of 1 + position in vals (0: empty)
	stats    VocabStats
}

// NewVocab builds a Vocab from the frequent values of each slot (sorted and
// deduplicated here; Missing is dropped).
func NewVocab(values [][]uint64, minCount int) *Vocab {
	v := &Vocab{minCount: minCount, vals: make([][]uint64, len(values))}
	for s, vs := range values {
		c := slices.Clone(vs)
		slices.Sort(c)
		c = slices.Compact(c)
		if n := len(c); n > 0 && c[n-1] == Missing {
			c = c[:n-1]
		}
		v.vals[s] = c
	}
	v.buildIndex()
	return v
}

// buildIndex builds the hash index of every slot: a power-of-two table of
// at least 1.5× the slot's values (4 bytes each), so a lookup costs one or
// two cache misses instead of a binary search's dozen.
func (v *Vocab) buildIndex() {
	v.index = make([][]int32, len(v.vals))
	for s, vs := range v.vals {
		n := 2
		for n < len(vs)+len(vs)/2+1 {
			n *= 2
		}
		t := make([]int32, n)
		mask := uint64(n - 1)
		for i, x := range vs {
			h := mix64(x) & mask
			for t[h] != 0 {
				h = (h + 1) & mask
			}
			t[h] = int32(i + 1)
		}
		v.index[s] = t
	}
}

// NumSlots returns the number of slots.
func (v *Vocab) NumSlots() int { return len(v.vals) }

// MinCount returns the threshold the vocabulary was built with.
func (v *Vocab) MinCount() int { return v.minCount }

// Values returns the frequent values of slot s in id order (id 2 first).
// The slice must not be modified.
func (v *Vocab) Values(s int) []uint64 { return v.vals[s] }

// Stats returns the statistics of the BuildVocab run (zero for a loaded
// Vocab).
func (v *Vocab) Stats() VocabStats { return v.stats }

// ID returns the slot-local id of value x of slot s.
func (v *Vocab) ID(s int, x uint64) int64 {
	if x == Missing {
		return IDMissing
	}
	t, vs := v.index[s], v.vals[s]
	mask := uint64(len(t) - 1)
	for h := mix64(x) & mask; t[h] != 0; h = (h + 1) & mask {
		if i := t[h] - 1; vs[i] == x {
			return int64(firstFrequent) + int64(i)
		}
	}
	return IDRare
}

// SlotSizes returns the number of ids of every slot (2 + its frequent
// values): the slot_size_array of data mapped with v.
func (v *Vocab) SlotSizes() []int64 {
	out := make([]int64, len(v.vals))
	for s, vs := range v.vals {
		out[s] = int64(firstFrequent + len(vs))
	}
	return out
}

// BuildVocab counts the categorical values of the text files paths (first
// pass) and returns the vocabulary of the values seen at least MinCount
// times. The counting holds at most MemoryBudget bytes: when its hash table
// is full, the counts are sorted and spilled as a run to TempDir, and the
// runs are merged (k-way, in several rounds when there are many) at the
// end. The ids do not depend on the budget or the worker count.
func BuildVocab(paths []string, o VocabOptions) (*Vocab, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, errors.New("no input files")
	}
	l := o.Layout.withDefaults()
	if o.MinCount == 0 {
		o.MinCount = DefaultMinCount
	}
	budget := o.MemoryBudget
	if budget == 0 {
		budget = DefaultMemoryBudget
	}
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	// Parse buffers get a quarter of the budget. A chunk of c text bytes
	// holds at most c/(nd+nc+1) lines, each parsed into 4+8·nc bytes.
	factor := 1 + float64(4+8*l.NumCat)/float64(l.NumDense+l.NumCat+1)
	nchunks := workers + 2
	for nchunks > 3 && float64(budget/4)/(float64(nchunks+1)*factor) < 16<<10 {
		nchunks--
	}
	workers = max(1, min(workers, nchunks-2))
	chunkSize := int(float64(budget/4) / (float64(nchunks+1) * factor)) // +1: the producer's carry
	chunkSize = min(chunkSize, 1<<20)
	b := &builder{
		budget:   budget,
		nc:       l.NumCat,
		minCount: uint32(min(int64(o.MinCount), math.MaxUint32)),
		dir:      o.TempDir,
		bufSize:  int(min(64<<10, budget/16)),
		fixed:    int64(float64(chunkSize) * float64(nchunks+1) * factor),
	}
	b.maxLen = 1 << 10
	for 24*int64(b.maxLen)*2 <= budget/2 {
		b.maxLen *= 2
	}
	defer b.cleanup()
	p := startPipeline(append([]string(nil), paths...), l, false, false, mapping{}, workers, nchunks, chunkSize)
	v, err := b.run(p)
	p.stop()
	if err != nil {
		return nil, err
	}
	return v, nil
}

// entry is a hash-table slot and a run record: slot+1 (0: empty), count
// (saturating) and value.
type entry struct {
	v uint64
	s uint32
	c uint32
}

const runRecord = 16 // bytes per run record: value u64, slot u32, count u32

type builder struct {
	budget   int64
	nc       int
	minCount uint32
	dir      string
	tmp      string // private temp directory, "" until the first spill
	bufSize  int
	fixed    int64 // parse buffers (worst case)

	t      []entry // open addressing, linear probing; len a power of 2
	n      int     // used entries
	maxLen int     // largest table length within budget

	w     *bufio.Writer // run writer, reused
	runs  []string
	stats VocabStats
	vals  [][]uint64
}

func (b *builder) account(n int64) {
	b.stats.PeakBytes = max(b.stats.PeakBytes, n)
}

func (b *builder) cleanup() {
	if b.tmp != "" {
		os.RemoveAll(b.tmp)
	}
}

func (b *builder) run(p *pipeline) (*Vocab, error) {
	b.t = make([]entry, min(1<<12, b.maxLen))
	b.account(b.fixed + 16*int64(len(b.t)))
	for {
		c, err := p.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		b.stats.Samples += int64(c.n)
		b.stats.Skipped += c.skipped
		b.stats.Clamped += c.clamped
		for i := 0; i < c.n; i++ {
			for s, v := range c.keys[i*b.nc : (i+1)*b.nc] {
				if v == Missing {
					continue
				}
				if err := b.add(uint32(s), v); err != nil {
					p.release(c)
					return nil, err
				}
			}
		}
		cerr := c.err
		p.release(c)
		if cerr != nil {
			return nil, cerr
		}
	}
	p.stop() // free the parse buffers before merging
	b.vals = make([][]uint64, b.nc)
	if len(b.runs) == 0 {
		b.sortTable()
		for _, e := range b.t[:b.n] {
			b.emit(e)
		}
	} else {
		if b.n > 0 {
			if err := b.spill(); err != nil {
				return nil, err
			}
		}
		b.t = nil
		if err := b.mergeAll(); err != nil {
			return nil, err
		}
	}
	v := &Vocab{minCount: int(b.minCount), vals: b.vals, stats: b.stats}
	v.buildIndex()
	return v, nil
}

func (b *builder) emit(e entry) {
	b.stats.Distinct++
	if e.c >= b.minCount {
		s := e.s - 1
		b.vals[s] = append(b.vals[s], e.v)
		b.stats.Frequent++
	}
}

func (b *builder) add(s uint32, v uint64) error {
	mask := uint64(len(b.t) - 1)
	h := mix64(v^uint64(s)*0x9e3779b97f4a7c15) & mask
	for {
		e := &b.t[h]
		if e.s == 0 {
			*e = entry{v: v, s: s + 1, c: 1}
			b.n++
			break
		}
		if e.v == v && e.s == s+1 {
			if e.c != 1<<32-1 {
				e.c++
			}
			return nil
		}
		h = (h + 1) & mask
	}
	if 4*b.n < 3*len(b.t) {
		return nil
	}
	if len(b.t) < b.maxLen {
		b.grow()
		return nil
	}
	return b.spill()
}

func (b *builder) grow() {
	old := b.t
	b.t = make([]entry, 2*len(old))
	b.account(b.fixed + 16*int64(len(old)+len(b.t)))
	mask := uint64(len(b.t) - 1)
	for _, e := range old {
		if e.s == 0 {
			continue
		}
		h := mix64(e.v^uint64(e.s-1)*0x9e3779b97f4a7c15) & mask
		for b.t[h].s != 0 {
			h = (h + 1) & mask
		}
		b.t[h] = e
	}
}

// sortTable moves the used entries to the front, sorted by (slot, value).
func (b *builder) sortTable() {
	j := 0
	for _, e := range b.t {
		if e.s != 0 {
			b.t[j] = e
			j++
		}
	}
	clear(b.t[j:])
	slices.SortFunc(b.t[:j], cmpEntry)
}

func cmpEntry(x, y entry) int {
	if x.s != y.s {
		if x.s < y.s {
			return -1
		}
		return 1
	}
	switch {
	case x.v < y.v:
		return -1
	case x.v > y.v:
		return 1
	}
	return 0
}

func (b *builder) newRun() (*os.File, *bufio.Writer, error) {
	if b.tmp == "" {
		d, err := os.MkdirTemp(b.dir, "ctrkit-vocab-*")
		if err != nil {
			return nil, nil, err
		}
		b.tmp = d
	}
	f, err := os.CreateTemp(b.tmp, "run-*")
	if err != nil {
		return nil, nil, err
	}
	if b.w == nil {
		b.w = bufio.NewWriterSize(f, b.bufSize)
	} else {
		b.w.Reset(f)
	}
	return f, b.w, nil
}

func putRecord(w *bufio.Writer, e entry) error {
	if w.Available() < runRecord {
		if err := w.Flush(); err != nil {
			return err
		}
	}
	r := w.AvailableBuffer()
	r = binary.LittleEndian.AppendUint64(r, e.v)
	r = binary.LittleEndian.AppendUint32(r, e.s)
	r = binary.LittleEndian.AppendUint32(r, e.c)
	_, err := w.Write(r)
	return err
}

func finishRun(f *os.File, w *bufio.Writer) error {
	err := w.Flush()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// spill writes the table as a sorted run and empties it.
func (b *builder) spill() error {
	b.sortTable()
	b.account(b.fixed + 16*int64(len(b.t)) + int64(b.bufSize))
	f, w, err := b.newRun()
	if err != nil {
		return fmt.Errorf("spilling vocabulary counts: %w", err)
	}
	for _, e := range b.t[:b.n] {
		if err := putRecord(w, e); err != nil {
			f.Close()
			return fmt.Errorf("spilling vocabulary counts: %w", err)
		}
	}
	if err := finishRun(f, w); err != nil {
		return fmt.Errorf("spilling vocabulary counts: %w", err)
	}
	clear(b.t[:b.n])
	b.n = 0
	b.runs = append(b.runs, f.Name())
	b.stats.Runs++
	return nil
}

// runReader reads one run; cur is its next record.
type runReader struct {
	f   *os.File
	r   *bufio.Reader
	cur entry
	rec [runRecord]byte
}

func (rr *runReader) advance() (bool, error) {
	rec := rr.rec[:]
	if _, err := io.ReadFull(rr.r, rec); err != nil {
		if err == io.EOF {
			return false, nil
		}
		return false, fmt.Errorf("reading vocabulary run %s: %w", rr.f.Name(), err)
	}
	rr.cur = entry{v: binary.LittleEndian.Uint64(rec[0:]), s: binary.LittleEndian.Uint32(rec[8:]), c: binary.LittleEndian.Uint32(rec[12:])}
	return true, nil
}

// mergeAll merges the runs in rounds of at most fanIn runs (read buffers
// within half the budget) and emits the final merge into the vocabulary.
func (b *builder) mergeAll() error {
	fanIn := int(max(2, (b.budget/2)/int64(b.bufSize)))
	for len(b.runs) > fanIn {
		f, w, err := b.newRun()
		if err != nil {
			return fmt.Errorf("merging vocabulary runs: %w", err)
		}
		var werr error
		err = b.merge(b.runs[:fanIn], func(e entry) {
			if werr == nil {
				werr = putRecord(w, e)
			}
		})
		if err == nil {
			err = werr
		}
		if ferr := finishRun(f, w); err == nil {
			err = ferr
		}
		if err != nil {
			return fmt.Errorf("merging vocabulary runs: %w", err)
		}
		for _, r := range b.runs[:fanIn] {
			os.Remove(r)
		}
		b.runs = append(b.runs[fanIn:], f.Name())
	}
	return b.merge(b.runs, b.emit)
}

// merge merges sorted runs, summing the counts of equal (slot, value), and
// calls out in order.
func (b *builder) merge(runs []string, out func(entry)) error {
	b.account(int64(len(runs)+1) * int64(b.bufSize))
	h := make([]*runReader, 0, len(runs))
	defer func() {
		for _, rr := range h {
			rr.f.Close()
		}
	}()
	for _, name := range runs {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		rr := &runReader{f: f, r: bufio.NewReaderSize(f, b.bufSize)}
		ok, err := rr.advance()
		if err != nil {
			f.Close()
			return err
		}
		if !ok {
			f.Close()
			continue
		}
		h = append(h, rr)
	}
	less := func(i, j int) bool { return cmpEntry(h[i].cur, h[j].cur) < 0 }
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(h) {
				return
			}
			m := l
			if r := l + 1; r < len(h) && less(r, l) {
				m = r
			}
			if !less(m, i) {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		down(i)
	}
	var acc entry
	have := false
	for len(h) > 0 {
		e := h[0].cur
		if have && e.s == acc.s && e.v == acc.v {
			acc.c = uint32(min(uint64(acc.c)+uint64(e.c), 1<<32-1))
		} else {
			if have {
				out(acc)
			}
			acc, have = e, true
		}
		ok, err := h[0].advance()
		if err != nil {
			return err
		}
		if !ok {
			h[0].f.Close()
			h[0] = h[len(h)-1]
			h = h[:len(h)-1]
		}
		down(0)
	}
	if have {
		out(acc)
	}
	return nil
}

// The vocabulary file (little-endian):
//
//	magic    [8]byte "CTRKVOC1"
//	slots    uint32  S
//	minCount uint32
//	counts   uint64 × S          frequent values per slot
//	values   uint64 × Σ counts   slot 0's values first, each slot ascending
//	crc      uint32              CRC-32C of every byte before it
const vocabMagic = "CTRKVOC1"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Save writes v to path atomically (see the file layout in the package doc).
func (v *Vocab) Save(path string) error {
	f, err := atomicfile.Create(path)
	if err != nil {
		return err
	}
	crc := crc32.New(castagnoli)
	w := bufio.NewWriterSize(io.MultiWriter(f, crc), 1<<16)
	var b [8]byte
	w.WriteString(vocabMagic)
	binary.LittleEndian.PutUint32(b[:4], uint32(len(v.vals)))
	w.Write(b[:4])
	binary.LittleEndian.PutUint32(b[:4], uint32(v.minCount))
	w.Write(b[:4])
	for _, vs := range v.vals {
		binary.LittleEndian.PutUint64(b[:], uint64(len(vs)))
		w.Write(b[:])
	}
	for _, vs := range v.vals {
		for _, x := range vs {
			binary.LittleEndian.PutUint64(b[:], x)
			w.Write(b[:])
		}
	}
	if err := w.Flush(); err != nil {
		f.Abort()
		return fmt.Errorf("writing vocabulary %s: %w", path, err)
	}
	binary.LittleEndian.PutUint32(b[:4], crc.Sum32())
	if _, err := f.Write(b[:4]); err != nil {
		f.Abort()
		return fmt.Errorf("writing vocabulary %s: %w", path, err)
	}
	return f.Commit()
}

// LoadVocab reads a vocabulary written by Save. A damaged file is an
// *formats.Error (Format "criteo-vocab") matching formats.ErrCorrupt.
func LoadVocab(path string) (*Vocab, error) {
	const fm = "criteo-vocab"
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if size < 20 || size > 1<<40 {
		return nil, formats.Errorf(fm, path, 0, -1, formats.ErrSize, "file size %d", size)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != size {
		return nil, formats.Errorf(fm, path, int64(len(data)), -1, formats.ErrSize, "file changed size while reading")
	}
	if string(data[:8]) != vocabMagic {
		return nil, formats.Errorf(fm, path, 0, -1, formats.ErrHeader, "bad magic %q", data[:8])
	}
	body := data[:len(data)-4]
	if got, want := crc32.Checksum(body, castagnoli), binary.LittleEndian.Uint32(data[len(data)-4:]); got != want {
		return nil, formats.Errorf(fm, path, int64(len(body)), -1, formats.ErrChecksum, "crc %08x, stored %08x", got, want)
	}
	S := int64(binary.LittleEndian.Uint32(data[8:]))
	minCount := int(binary.LittleEndian.Uint32(data[12:]))
	if 16+8*S > int64(len(body)) {
		return nil, formats.Errorf(fm, path, 8, -1, formats.ErrHeader, "%d slots do not fit in %d bytes", S, size)
	}
	var total uint64
	counts := make([]uint64, S)
	for s := range counts {
		counts[s] = binary.LittleEndian.Uint64(data[16+8*s:])
		total += counts[s]
		if counts[s] > uint64(len(body)) || total > uint64(len(body)) {
			return nil, formats.Errorf(fm, path, 16+8*int64(s), -1, formats.ErrHeader, "slot %d count %d does not fit the file", s, counts[s])
		}
	}
	off := 16 + 8*S
	if uint64(off)+8*total != uint64(len(body)) {
		return nil, formats.Errorf(fm, path, off, -1, formats.ErrSize, "%d values need %d bytes, file has %d", total, 8*total, int64(len(body))-off)
	}
	all := make([]uint64, total)
	for i := range all {
		all[i] = binary.LittleEndian.Uint64(data[off+8*int64(i):])
	}
	v := &Vocab{minCount: minCount, vals: make([][]uint64, S)}
	for s := range v.vals {
		vs := all[:counts[s]:counts[s]]
		all = all[counts[s]:]
		for i, x := range vs {
			if x == Missing || i > 0 && x <= vs[i-1] {
				return nil, formats.Errorf(fm, path, off, -1, formats.ErrMetadata, "slot %d values not strictly ascending at %d", s, i)
			}
			off += 8
		}
		v.vals[s] = vs
	}
	v.buildIndex()
	return v, nil
}

// WriteSlotSizeJSON writes sizes atomically to path as
// {"slot_size_array": [n0, n1, …]}, the form HugeCTR configs use.
func WriteSlotSizeJSON(path string, sizes []int64) error {
	data, err := SlotSizeJSON(sizes)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data)
}

// SlotSizeJSON is the text WriteSlotSizeJSON writes.
func SlotSizeJSON(sizes []int64) ([]byte, error) {
	if sizes == nil {
		sizes = []int64{}
	}
	data, err := json.Marshal(struct {
		SlotSizeArray []int64 `json:"slot_size_array"`
	}{sizes})
	return append(data, '\n'), err
}

// ReadSlotSizeJSON reads a file written by WriteSlotSizeJSON.
func ReadSlotSizeJSON(path string) ([]int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var v struct {
		SlotSizeArray *[]int64 `json:"slot_size_array"`
	}
	if err := json.Unmarshal(data, &v); err != nil || v.SlotSizeArray == nil {
		if err == nil {
			err = errors.New("no slot_size_array")
		}
		return nil, formats.Errorf("criteo", path, -1, -1, formats.ErrMetadata, "%v", err)
	}
	for i, n := range *v.SlotSizeArray {
		if n <= 0 {
			return nil, formats.Errorf("criteo", path, -1, -1, formats.ErrMetadata, "slot_size_array[%d] = %d", i, n)
		}
	}
	return *v.SlotSizeArray, nil
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

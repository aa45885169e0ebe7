package norm

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/ctrkit/ctrkit/formats"
	"golang.org/x/sync/errgroup"
)

// DecoderOptions configure a Decoder.
type DecoderOptions struct {
	// Check is the record framing.
	Check CheckMode
	// SkipCorrupt skips records with a bad check byte (counting them, like
	// HugeCTR) instead of failing.
	SkipCorrupt bool
	// SlotSizeArray enables slot offsets (SPEC §3.3); see formats.Options.
	SlotSizeArray []int64
}

// Decoder decodes Norm records (the bytes after the file header) into a
// formats.Batch. It holds no buffers and no state between calls, so one
// Decoder may be used by several goroutines at once, each with its own
// destination batch or disjoint part of one.
type Decoder struct {
	schema  *formats.Schema
	check   CheckMode
	skip    bool
	ld, dd  int      // label and dense widths in floats
	nslots  int      // S
	ks      int      // key size in bytes
	minRec  int      // smallest payload: 4·(ld+dd+S)
	maxRec  int      // largest payload when every slot is bounded, else -1
	maxNNZ  []uint32 // per slot; math.MaxInt32 when unbounded
	sizes   []uint64 // slot sizes, nil without offsets
	offsets []int64  // slot offsets, nil without offsets
}

// NewDecoder returns a decoder for records of schema s.
func NewDecoder(s *formats.Schema, o DecoderOptions) (*Decoder, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if !o.Check.valid() {
		return nil, fmt.Errorf("invalid check mode %d", int(o.Check))
	}
	fo := formats.Options{SlotSizeArray: o.SlotSizeArray}
	if err := fo.Validate(s); err != nil {
		return nil, err
	}
	d := &Decoder{
		schema: s, check: o.Check, skip: o.SkipCorrupt,
		ld: s.LabelDim, dd: s.DenseDim, nslots: len(s.Slots), ks: s.KeyType.Size(),
		maxNNZ: make([]uint32, len(s.Slots)),
	}
	d.minRec = 4 * (d.ld + d.dd + d.nslots)
	d.maxRec = d.minRec
	for i, sl := range s.Slots {
		d.maxNNZ[i] = math.MaxInt32
		if sl.MaxNNZ > 0 {
			d.maxNNZ[i] = uint32(min(sl.MaxNNZ, math.MaxInt32))
		}
		if sl.MaxNNZ <= 0 || d.maxRec < 0 {
			d.maxRec = -1
		} else {
			d.maxRec += d.ks * sl.MaxNNZ
		}
	}
	if len(o.SlotSizeArray) > 0 {
		d.sizes = make([]uint64, len(o.SlotSizeArray))
		for i, n := range o.SlotSizeArray {
			d.sizes[i] = uint64(n)
		}
		d.offsets = formats.SlotOffsets(o.SlotSizeArray)
	}
	return d, nil
}

// Schema returns the schema the decoder was made for.
func (d *Decoder) Schema() *formats.Schema { return d.schema }

// Pos locates a source slice in its file, for error reports.
type Pos struct {
	Path   string
	Offset int64 // byte offset of src[0] in the file
	Record int64 // index in the file of the record starting at src[0]
}

// Result says how far a Decode call got.
type Result struct {
	Consumed int // bytes of src consumed: whole records only
	Records  int // records consumed, skipped ones included
	Skipped  int // records skipped for a bad check byte (SkipCorrupt)
}

// Decode decodes whole records from the start of src and appends their
// samples to b after its b.N samples. It stops after limit records
// (decoded or skipped), when b is full, or when src does not hold the next
// record completely (a truncated record is not an error here: the caller
// knows whether more bytes exist). b must have been made for a schema of
// the decoder's shape. With unbounded slots the batch's key buffer grows as
// needed; otherwise Decode allocates nothing.
//
// On error, b holds the samples decoded before the failing record, and the
// error is a *formats.Error whose Offset is the byte offset in the file of
// the failing record (ErrChecksum, ErrSize) or field (ErrNNZ: the nnz field;
// ErrKeyRange: the key), and whose Record is the record's index in the file.
func (d *Decoder) Decode(src []byte, b *formats.Batch, limit int, pos Pos) (Result, error) {
	if err := d.checkBatch(b); err != nil {
		return Result{}, err
	}
	return d.decode(src, b, limit, b.Cap(), pos)
}

// decode is Decode stopping when b holds maxN samples.
func (d *Decoder) decode(src []byte, b *formats.Batch, limit, maxN int, pos Pos) (Result, error) {
	st := state{n: b.N, kpos: b.NumKeys(), capN: maxN, limit: limit}
	for {
		var err error
		if b.Schema.KeyType == formats.KeyI64 {
			_, _, offsets, _, keys := b.Full()
			err = decodeLoop(d, src, &st, b, offsets, keys, pos)
		} else {
			_, _, offsets, keys, _ := b.Full()
			err = decodeLoop(d, src, &st, b, offsets, keys, pos)
		}
		if err == errGrow {
			b.SetLen(st.n) // ReserveKeys keeps the keys of the first N samples
			if err := b.ReserveKeys(st.grow); err != nil {
				return st.result(), err
			}
			continue
		}
		b.SetLen(st.n)
		return st.result(), err
	}
}

func (d *Decoder) checkBatch(b *formats.Batch) error {
	s := b.Schema
	if s.LabelDim != d.ld || s.DenseDim != d.dd || len(s.Slots) != d.nslots || s.KeyType.Size() != d.ks {
		return fmt.Errorf("batch schema %d/%d/%d %s, decoder %d/%d/%d %s",
			s.LabelDim, s.DenseDim, len(s.Slots), s.KeyType, d.ld, d.dd, d.nslots, d.schema.KeyType)
	}
	return nil
}

// state is the cursor of a decodeLoop run.
type state struct {
	p       int // bytes consumed
	n       int // next sample index in the batch
	kpos    int // next key index in the batch
	capN    int // stop when n reaches it
	limit   int // stop after this many records
	records int
	skipped int
	grow    int // keys needed when decodeLoop returns errGrow
}

func (st *state) result() Result {
	return Result{Consumed: st.p, Records: st.records, Skipped: st.skipped}
}

// errGrow asks Decode to grow the key buffer to st.grow keys and resume.
var errGrow = fmt.Errorf("grow")

type key interface{ uint32 | int64 }

// loadKey reads a little-endian key of K's width from p (len(p) == its size).
func loadKey[K key](p []byte) K {
	if unsafe.Sizeof(K(0)) == 4 {
		return K(binary.LittleEndian.Uint32(p))
	}
	return K(binary.LittleEndian.Uint64(p))
}

// decodeLoop decodes records of src from st.p into the batch buffers. The
// label and dense values are written through b's full buffers; offsets and
// keys are passed in so the loop is specialised per key type.
func decodeLoop[K key](d *Decoder, src []byte, st *state, b *formats.Batch, offsets []int32, keys []K, pos Pos) error {
	labels, dense, _, _, _ := b.Full()
	ld, dd, S := d.ld, d.dd, d.nslots
	ks := int(unsafe.Sizeof(K(0))) // folded per shape
	maxNNZ := d.maxNNZ[:S]
	noOffsets := d.sizes == nil
	framed := d.check == CheckSum
	for st.records < st.limit && st.n < st.capN {
		rec := src[st.p:]
		start := st.p
		var payload []byte
		if framed {
			if len(rec) < 4 {
				return nil
			}
			l := int64(int32(binary.LittleEndian.Uint32(rec)))
			if l < int64(d.minRec) || (d.maxRec >= 0 && l > int64(d.maxRec)) {
				return d.errorf(pos, start, st.records, formats.ErrSize, "record length", "framed length %d outside [%d, %s]", l, d.minRec, maxStr(d.maxRec))
			}
			if int64(len(rec)) < l+FrameOverhead {
				return nil
			}
			payload = rec[4 : 4+l]
			if rec[4+l] != checksum(payload) {
				if d.skip {
					st.p += int(l) + FrameOverhead
					st.records++
					st.skipped++
					continue
				}
				return d.errorf(pos, start, st.records, formats.ErrChecksum, "check byte", "check byte %#02x, payload sums to %#02x", rec[4+l], checksum(payload))
			}
		} else {
			payload = rec
		}
		// Labels and dense values.
		q := 4 * (ld + dd)
		if len(payload) < q {
			if framed {
				return d.errorf(pos, start, st.records, formats.ErrSize, "record length", "framed length %d too short", len(payload))
			}
			return nil
		}
		lab := labels[st.n*ld : st.n*ld+ld]
		for j := range lab {
			lab[j] = math.Float32frombits(binary.LittleEndian.Uint32(payload[4*j:]))
		}
		den := dense[st.n*dd : st.n*dd+dd]
		vals := payload[4*ld : q]
		for j := range den {
			den[j] = math.Float32frombits(binary.LittleEndian.Uint32(vals[4*j:]))
		}
		// Slots.
		kpos := st.kpos
		row := offsets[st.n*S+1 : st.n*S+1+S]
		maxNNZ := maxNNZ[:len(row)]
		for s := range row {
			if len(payload)-q < 4 {
				if framed {
					return d.errorf(pos, start, st.records, formats.ErrSize, "record length", "framed length %d ends inside slot %d", len(payload), s)
				}
				return nil
			}
			nnz := binary.LittleEndian.Uint32(payload[q : q+4])
			if nnz > maxNNZ[s] {
				return d.errorf(pos, start+q+d.frameOff(), st.records, formats.ErrNNZ, fmt.Sprintf("slot %d nnz", s), "nnz %d, max %s", int32(nnz), maxStr(int(d.maxNNZ[s])))
			}
			q += 4
			n := int(nnz)
			if len(payload)-q < n*ks {
				if framed {
					return d.errorf(pos, start, st.records, formats.ErrSize, "record length", "framed length %d ends inside slot %d keys", len(payload), s)
				}
				return nil
			}
			end := kpos + n
			if end > len(keys) {
				if end > math.MaxInt32 {
					return d.errorf(pos, start, st.records, formats.ErrSize, "batch", "more than 2^31 keys in one batch")
				}
				st.grow = end + (len(src)-st.p)/d.minRec
				return errGrow
			}
			if noOffsets {
				if n == 1 { // one-hot fast path
					keys[kpos] = loadKey[K](payload[q : q+ks])
				} else {
					for j := kpos; j < end; j++ {
						keys[j] = loadKey[K](payload[q : q+ks])
						q += ks
					}
					q -= n * ks
				}
			} else {
				size, off := d.sizes[s], d.offsets[s]
				for j := 0; j < n; j++ {
					k := uint64(loadKey[K](payload[q+ks*j : q+ks*j+ks]))
					if ks == 4 {
						k &= math.MaxUint32
					}
					if k >= size {
						return d.errorf(pos, start+q+ks*j+d.frameOff(), st.records, formats.ErrKeyRange, fmt.Sprintf("slot %d key %d", s, j), "key %d ≥ slot size %d", int64(k), size)
					}
					keys[kpos+j] = K(int64(k) + off)
				}
			}
			q += ks * n
			kpos = end
			row[s] = int32(kpos)
		}
		if framed {
			if q != len(payload) {
				return d.errorf(pos, start, st.records, formats.ErrSize, "record length", "framed length %d, payload parses to %d bytes", len(payload), q)
			}
			q += FrameOverhead
		}
		st.p += q
		st.kpos = kpos
		st.n++
		st.records++
	}
	return nil
}

// frameOff is the offset of the payload within a record.
func (d *Decoder) frameOff() int {
	if d.check == CheckSum {
		return 4
	}
	return 0
}

func (d *Decoder) errorf(pos Pos, off, rec int, sentinel error, op, detail string, args ...any) error {
	e := formats.Errorf("norm", pos.Path, pos.Offset+int64(off), pos.Record+int64(rec), sentinel, detail, args...)
	e.Op = op
	return e
}

func maxStr(n int) string {
	if n < 0 || n == math.MaxInt32 {
		return "unbounded"
	}
	return fmt.Sprint(n)
}

// scanned is what scan learns about a run of whole records, as
// checkpoints every scanStride records and at the end of the run:
// checkpoint i is before record rec[i], at byte start[i] of src, after
// samples[i] samples and keys[i] keys of the run.
type scanned struct {
	rec, start, samples, keys []int
}

// scanStride is the distance in records between checkpoints.
const scanStride = 32

func (sc *scanned) records() int { return sc.rec[len(sc.rec)-1] }

// end returns the byte length of the run.
func (sc *scanned) end() int { return sc.start[len(sc.start)-1] }

func (sc *scanned) mark(r, p, n, k int) {
	sc.rec = append(sc.rec, r)
	sc.start = append(sc.start, p)
	sc.samples = append(sc.samples, n)
	sc.keys = append(sc.keys, k)
}

// scan walks whole records of src without decoding them, up to limit
// records or maxSamples samples, recording their boundaries for parallel
// decoding. It stops early, without error, at an incomplete record or at
// anything decodeLoop would reject (decodeLoop then reports it, in order).
func (d *Decoder) scan(src []byte, limit, maxSamples int, sc *scanned) {
	sc.rec, sc.start, sc.samples, sc.keys = sc.rec[:0], sc.start[:0], sc.samples[:0], sc.keys[:0]
	p, n, k, r := 0, 0, 0, 0
	defer func() { sc.mark(r, p, n, k) }()
	fixed := 4 * (d.ld + d.dd)
	for ; r < limit && n < maxSamples; r++ {
		if r%scanStride == 0 {
			sc.mark(r, p, n, k)
		}
		rec := src[p:]
		if d.check == CheckSum {
			if len(rec) < 4 {
				break
			}
			l := int(int32(binary.LittleEndian.Uint32(rec)))
			if l < d.minRec || (d.maxRec >= 0 && l > d.maxRec) || len(rec)-FrameOverhead < l {
				break
			}
			nk := (l - d.minRec) / d.ks
			if nk*d.ks != l-d.minRec {
				break
			}
			p += l + FrameOverhead
			if !d.skip || rec[4+l] == checksum(rec[4:4+l]) {
				n++
				k += nk
			}
		} else {
			q, nk := fixed, 0
			if len(rec) < q {
				break
			}
			s := 0
			for ; s < d.nslots; s++ {
				if len(rec)-q < 4 {
					break
				}
				nnz := binary.LittleEndian.Uint32(rec[q:])
				if nnz > d.maxNNZ[s] || len(rec)-q-4 < int(nnz)*d.ks {
					break
				}
				q += 4 + d.ks*int(nnz)
				nk += int(nnz)
			}
			if s < d.nslots {
				break
			}
			p += q
			n++
			k += nk
		}
	}
}

// minParallelRecords is the smallest run of records worth splitting over
// goroutines; each goroutine gets at least a quarter of it.
const minParallelRecords = 512

// decodeParallel decodes the records scan found at the start of src with up
// to w goroutines, each writing a disjoint range of b's samples and keys
// (known from the scan), so the batch is the same as Decode's. It returns
// ok=false, having done nothing, when the run is too short to split; the
// caller then uses Decode, which also reports whatever stopped the scan.
// Runs shorter than minRun records are not split.
func (d *Decoder) decodeParallel(src []byte, b *formats.Batch, limit, maxN int, pos Pos, w, minRun int, sc *scanned) (Result, bool, error) {
	d.scan(src, limit, maxN-b.N, sc)
	R := sc.records()
	if R < max(minRun, 2) || w < 2 {
		return Result{}, false, nil
	}
	w = min(w, R/max(minRun/4, 1), len(sc.rec)-1)
	res, err := d.decodeScanned(src, b, maxN, pos, w, sc)
	return res, true, err
}

// decodeScanned decodes the records sc found at the start of src (appended
// to b) on w goroutines, joined before it returns.
func (d *Decoder) decodeScanned(src []byte, b *formats.Batch, maxN int, pos Pos, w int, sc *scanned) (Result, error) {
	n0, k0 := b.N, b.NumKeys()
	R := sc.records()
	last := len(sc.rec) - 1
	if err := b.ReserveKeys(k0 + sc.keys[last]); err != nil {
		return Result{}, err
	}
	var errs [maxChunks]error
	var skipped [maxChunks]int
	w = min(w, maxChunks)
	var g errgroup.Group
	for c := 0; c < w; c++ {
		lo, hi := c*last/w, (c+1)*last/w // checkpoints
		g.Go(func() error {
			recs := sc.rec[hi] - sc.rec[lo]
			st := state{n: n0 + sc.samples[lo], kpos: k0 + sc.keys[lo], capN: maxN, limit: recs}
			chunk := src[sc.start[lo]:sc.start[hi]]
			p := Pos{Path: pos.Path, Offset: pos.Offset + int64(sc.start[lo]), Record: pos.Record + int64(sc.rec[lo])}
			var err error
			if b.Schema.KeyType == formats.KeyI64 {
				_, _, offsets, _, keys := b.Full()
				err = decodeLoop(d, chunk, &st, b, offsets, keys, p)
			} else {
				_, _, offsets, keys, _ := b.Full()
				err = decodeLoop(d, chunk, &st, b, offsets, keys, p)
			}
			if err == nil && st.records != recs {
				err = fmt.Errorf("internal error: chunk decoded %d of %d records", st.records, recs)
			}
			if err == errGrow {
				err = fmt.Errorf("internal error: key buffer too small after reserve")
			}
			errs[c], skipped[c] = err, st.skipped
			return nil
		})
	}
	g.Wait()
	for c := 0; c < w; c++ {
		if errs[c] != nil {
			// Samples of earlier chunks are complete; the batch is
			// abandoned with the error anyway.
			return Result{}, errs[c]
		}
	}
	res := Result{Consumed: sc.end(), Records: R}
	for c := 0; c < w; c++ {
		res.Skipped += skipped[c]
	}
	b.SetLen(n0 + sc.samples[last])
	return res, nil
}

// maxChunks bounds the goroutines of one decodeParallel call.
const maxChunks = 64

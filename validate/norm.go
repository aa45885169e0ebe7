package validate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/ctrkit/ctrkit/dataset"
	"github.com/ctrkit/ctrkit/formats"
	"github.com/ctrkit/ctrkit/formats/norm"
)

// normBatch is the batch size of the Norm walk.
const normBatch = 1024

// norm validates Norm files: the key width and schema come from the flags,
// else from the first file Detect and ParseHeader accept.
func (v *run) norm(files []string) error {
	sp := v.spec
	kt := sp.KeyType
	if !sp.KeyTypeSet {
		found := false
		for _, f := range files {
			det, err := norm.Detect(f)
			if err != nil {
				continue
			}
			if t, ok := det.KeyType(); ok {
				kt, found = t, true
				v.note("key type %s (detected on %s)", t, f)
				break
			}
		}
		if !found {
			v.note("key type could not be detected (no file fits exactly one width); assuming i32 — give --i64-input-key if the keys are 64-bit")
		}
	}
	// The schema: the flags, completed by the first header that parses.
	var hdr *norm.Header
	for _, f := range files {
		head, err := dataset.ReadHead(f, norm.FramedHeaderSize)
		if err != nil {
			continue
		}
		h, _, err := norm.ParseHeader(head, v.checkMode(head))
		if err == nil && h.Validate(nil, v.checkMode(head), -1) == nil {
			hdr = &h
			break
		}
	}
	if hdr == nil && (sp.NumSlot == 0 && sp.LabelDim == 0 && sp.DenseDim == 0) {
		// No header parses and no shape was given: report every file's
		// header problem.
		for _, f := range files {
			v.normFile(f, nil, nil)
		}
		return nil
	}
	s := formats.Schema{KeyType: kt}
	if hdr != nil {
		s = hdr.Schema(kt)
	}
	if sp.LabelDim > 0 {
		s.LabelDim = sp.LabelDim
	}
	if sp.DenseDim > 0 {
		s.DenseDim = sp.DenseDim
	}
	if sp.NumSlot > 0 && sp.NumSlot != len(s.Slots) {
		s = formats.NewSchema(s.LabelDim, s.DenseDim, make([]int, sp.NumSlot), nil, kt)
	}
	for i := range s.Slots {
		s.Slots[i].MaxNNZ = 0
	}
	if err := v.spec.ForSlots(len(s.Slots)); err != nil {
		return err
	}
	sp = v.spec
	for i, n := range sp.NNZ {
		s.Slots[i].MaxNNZ = n
	}
	if err := s.Validate(); err != nil {
		return err
	}
	decs := map[norm.CheckMode]*norm.Decoder{}
	for _, m := range []norm.CheckMode{norm.CheckNone, norm.CheckSum} {
		d, err := norm.NewDecoder(&s, norm.DecoderOptions{Check: m})
		if err != nil {
			return err
		}
		decs[m] = d
	}
	b, err := formats.NewBatch(&s, normBatch, nil)
	if err != nil {
		return err
	}
	defer b.Free()
	for _, f := range files {
		v.normFile(f, decs, b)
	}
	return nil
}

// checkMode is the flag's check mode, else the file's own (a file starting
// with a 64-byte frame is framed).
func (v *run) checkMode(head []byte) norm.CheckMode {
	if v.spec.CheckSet {
		return v.spec.Check
	}
	if len(head) >= 4 && binary.LittleEndian.Uint32(head) == norm.HeaderSize {
		return norm.CheckSum
	}
	return norm.CheckNone
}

// normFile validates one Norm file. decs nil: only its header is checked.
func (v *run) normFile(path string, decs map[norm.CheckMode]*norm.Decoder, b *formats.Batch) {
	r := v.rep
	f, err := os.Open(path)
	if err != nil {
		r.add(KindIO, path, -1, -1, "%v", err)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		r.add(KindIO, path, -1, -1, "%v", err)
		return
	}
	size := st.Size()
	var hb [norm.FramedHeaderSize]byte
	n, _ := io.ReadFull(f, hb[:])
	m := v.checkMode(hb[:n])
	h, hlen, err := norm.ParseHeader(hb[:n], m)
	if err == nil {
		var s *formats.Schema
		if decs != nil {
			s = decs[m].Schema()
		}
		// Not against the file size: a file shorter than its header
		// promises is reported as truncated where it ends, after its
		// records are checked (the walk allocates nothing per record).
		err = h.Validate(s, m, -1)
	}
	if err != nil {
		var fe *formats.Error
		if errors.As(err, &fe) {
			fe.Path = path
		}
		r.addErr(path, err, "; file skipped")
		v.progress(size)
		return
	}
	r.Checked++
	if decs == nil {
		return
	}
	dec := decs[m]
	s := dec.Schema()
	framed := m == norm.CheckSum
	l := &layout{ld: int64(s.LabelDim), dd: int64(s.DenseDim), keyW: int64(s.KeyType.Size()), nnz: true}
	if framed {
		l.frame = 4
	}
	fixed := 4 * int64(s.LabelDim+s.DenseDim)
	minRec := 4 * int64(s.LabelDim+s.DenseDim+len(s.Slots))
	var sizes []int64
	if len(v.spec.SlotSizeArray) > 0 {
		sizes = v.spec.SlotSizeArray
	}

	buf := make([]byte, min(int64(v.o.BufferSize), size))
	var lo, hi int         // buf[lo:hi] holds file bytes [off, off+hi-lo)
	off := int64(hlen)     // file offset of the next record
	fileOff := int64(hlen) // file offset of buf[hi]
	rec := int64(0)
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		r.add(KindIO, path, off, -1, "%v", err)
		return
	}
	eof := false
	// refill moves the unread bytes to the front of buf and reads after
	// them; false after an I/O error (reported).
	refill := func() bool {
		copy(buf, buf[lo:hi])
		hi -= lo
		lo = 0
		k, err := io.ReadFull(f, buf[hi:])
		hi += k
		fileOff += int64(k)
		v.progress(int64(k))
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			eof = true
		} else if err != nil {
			r.add(KindIO, path, fileOff, rec, "%v", err)
			return false
		}
		return true
	}
	recOff := make([]int64, normBatch)
	for rec < h.NumRecords {
		if !eof && (hi-lo < len(buf)/2 || hi-lo < int(minRec)+norm.FrameOverhead) && !refill() {
			return
		}
		b.SetLen(0)
		limit := int(min(h.NumRecords-rec, math.MaxInt32))
		res, err := dec.Decode(buf[lo:hi], b, limit, norm.Pos{Path: path, Offset: off, Record: rec})
		// Offsets of the decoded records.
		p := off
		for i := 0; i < b.N; i++ {
			recOff[i] = p
			p += fixed + l.frame
			if framed {
				p++
			}
			for si := range s.Slots {
				a, z := b.Row(i, si)
				p += 4 + l.keyW*int64(z-a)
			}
		}
		l.recOff = recOff[:b.N]
		v.checkValues(path, b, rec, l, sizes, nil)
		r.Samples += int64(b.N)
		lo += res.Consumed
		off += int64(res.Consumed)
		rec += int64(res.Records)
		if err != nil {
			if !framed {
				r.addErr(path, err, fmt.Sprintf("; unframed file: no length prefix to resynchronise on, so the remaining %d records (bytes %d..%d) are not checked", h.NumRecords-rec, off, size))
				v.progress(size - fileOff)
				return
			}
			// Skip the failing record by its length prefix (Decode saw it).
			ln := int64(int32(binary.LittleEndian.Uint32(buf[lo:])))
			if !errors.Is(err, formats.ErrChecksum) && (ln < minRec || off+4+ln+1 > size) {
				r.addErr(path, err, fmt.Sprintf("; the framed length cannot be trusted, so the remaining %d records are not checked", h.NumRecords-rec))
				v.progress(size - fileOff)
				return
			}
			r.addErr(path, err, "; record skipped")
			skip := 4 + ln + 1
			if int64(hi-lo) >= skip {
				lo += int(skip)
			} else {
				// Skip beyond the buffer: reposition the file.
				if _, err := f.Seek(off+skip, io.SeekStart); err != nil {
					r.add(KindIO, path, off, rec, "%v", err)
					return
				}
				v.progress(off + skip - fileOff)
				fileOff = off + skip
				lo, hi, eof = 0, 0, false
			}
			off += skip
			rec++
			continue
		}
		if res.Records == 0 {
			switch {
			case eof:
				r.add(KindTruncated, path, off, rec, "file ends at byte %d inside record %d (the header promises %d records)", size, rec, h.NumRecords)
				return
			case hi-lo == len(buf):
				// One record larger than the buffer: grow it, bounded by the file.
				nb := make([]byte, min(int64(2*len(buf)), size))
				if len(nb) <= len(buf) {
					r.add(KindSize, path, off, rec, "record does not fit in the file")
					return
				}
				copy(nb, buf[lo:hi])
				hi -= lo
				lo = 0
				buf = nb
			default:
				if !refill() {
					return
				}
			}
		}
	}
	if rest := size - off; rest > 0 {
		r.add(KindSize, path, off, -1, "%d bytes after the last of the header's %d records", rest, h.NumRecords)
	}
	v.progress(size - fileOff)
}

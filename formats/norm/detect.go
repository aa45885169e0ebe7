package norm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/ctrkit/ctrkit/formats"
)

// Detection is what Detect learns about a Norm file of unknown key width.
type Detection struct {
	Header Header
	Check  CheckMode
	// KeyTypes lists every key width with which number_of_records samples
	// end exactly at the end of the file, i32 first.
	KeyTypes []formats.KeyType
	// Ambiguous is true when both widths fit (for example when every nnz
	// is 0); the caller must then choose.
	Ambiguous bool
}

// KeyType returns the detected key type and whether it is unique.
func (d *Detection) KeyType() (formats.KeyType, bool) {
	if len(d.KeyTypes) != 1 {
		return 0, false
	}
	return d.KeyTypes[0], true
}

// Detect finds the check mode and key width of a Norm file (SPEC §2.2): the
// check mode from the header (error_check, confirmed by the framing), the
// key width by walking the records with each candidate and keeping those
// that land exactly on the end of the file after number_of_records
// samples. It streams the file; memory does not depend on its size. A file
// no candidate fits is an ErrSchema *formats.Error.
func Detect(path string) (Detection, error) {
	var det Detection
	f, err := os.Open(path)
	if err != nil {
		return det, &formats.Error{Format: "norm", Path: path, Offset: -1, Record: -1, Op: "open", Err: err}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return det, &formats.Error{Format: "norm", Path: path, Offset: -1, Record: -1, Op: "stat", Err: err}
	}
	size := fi.Size()
	var hb [FramedHeaderSize]byte
	n, _ := io.ReadFull(f, hb[:])
	m := CheckNone
	if n >= 4 && binary.LittleEndian.Uint32(hb[:]) == HeaderSize {
		m = CheckSum
	}
	h, _, err := ParseHeader(hb[:n], m)
	if err != nil {
		return det, withPath(err, path)
	}
	if err := h.Validate(nil, m, size); err != nil {
		return det, withPath(err, path)
	}
	det.Header, det.Check = h, m
	var firstErr error
	for _, kt := range []formats.KeyType{formats.KeyU32, formats.KeyI64} {
		if _, err := f.Seek(int64(m.headerLen()), io.SeekStart); err != nil {
			return det, &formats.Error{Format: "norm", Path: path, Offset: -1, Record: -1, Op: "seek", Err: err}
		}
		err := walk(bufio.NewReaderSize(f, 1<<16), &h, m, kt.Size(), size-int64(m.headerLen()))
		if err == nil {
			det.KeyTypes = append(det.KeyTypes, kt)
		} else if firstErr == nil {
			firstErr = fmt.Errorf("%s: %w", kt, err)
		}
	}
	det.Ambiguous = len(det.KeyTypes) > 1
	if len(det.KeyTypes) == 0 {
		return det, formats.Errorf("norm", path, -1, -1, formats.ErrSchema, "no key width lands on the end of the file after %d records (%v)", h.NumRecords, firstErr)
	}
	return det, nil
}

var errWalk = errors.New("does not fit")

// walk follows the record structure of h.NumRecords records with key size
// ks through r, which holds exactly room bytes, and reports whether they end
// exactly at its end.
func walk(r *bufio.Reader, h *Header, m CheckMode, ks int, room int64) error {
	var b4 [4]byte
	fixed := 4 * (h.LabelDim + h.DenseDim)
	for i := int64(0); i < h.NumRecords; i++ {
		var l, used int64
		if m == CheckSum {
			if _, err := io.ReadFull(r, b4[:]); err != nil {
				return fmt.Errorf("record %d: %w", i, errWalk)
			}
			l = int64(int32(binary.LittleEndian.Uint32(b4[:])))
			room -= 4
			if l < 0 || l+1 > room {
				return fmt.Errorf("record %d: framed length %d: %w", i, l, errWalk)
			}
		}
		if fixed > room {
			return fmt.Errorf("record %d: %w", i, errWalk)
		}
		if _, err := r.Discard(int(fixed)); err != nil {
			return fmt.Errorf("record %d: %w", i, errWalk)
		}
		room -= fixed
		used = fixed
		for s := int64(0); s < h.SlotNum; s++ {
			if _, err := io.ReadFull(r, b4[:]); err != nil {
				return fmt.Errorf("record %d slot %d: %w", i, s, errWalk)
			}
			nnz := int64(int32(binary.LittleEndian.Uint32(b4[:])))
			room -= 4
			kb := nnz * int64(ks)
			if nnz < 0 || kb > room {
				return fmt.Errorf("record %d slot %d: nnz %d: %w", i, s, nnz, errWalk)
			}
			if _, err := r.Discard(int(kb)); err != nil {
				return fmt.Errorf("record %d: %w", i, errWalk)
			}
			room -= kb
			used += 4 + kb
		}
		if m == CheckSum {
			if used != l || room < 1 {
				return fmt.Errorf("record %d: framed length %d, payload %d: %w", i, l, used, errWalk)
			}
			r.Discard(1)
			room--
		}
	}
	if room != 0 {
		return fmt.Errorf("%d bytes left after %d records: %w", room, h.NumRecords, errWalk)
	}
	return nil
}

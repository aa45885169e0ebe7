package norm

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/ctrkit/ctrkit/formats"
)

// Frozen constants of the format (SPEC §2). Changing any of them breaks
// compatibility with HugeCTR.
const (
	// HeaderSize is the size of the DataSetHeader payload.
	HeaderSize = 64
	// FrameOverhead is what checksum framing adds to a record: the int32
	// length before the payload and the check byte after it.
	FrameOverhead = 5
	// FramedHeaderSize is the size of a framed header: 4 + 64 + 1 = 69, the
	// offset of the first sample of a checksum file.
	FramedHeaderSize = HeaderSize + FrameOverhead
)

// CheckMode is the record framing of a Norm file: the header's error_check.
type CheckMode int

const (
	// CheckNone: records are bare payloads (error_check = 0).
	CheckNone CheckMode = 0
	// CheckSum: every record, the header too, is framed as
	// int32 length | payload | uint8 sum of the payload bytes mod 256
	// (error_check = 1).
	CheckSum CheckMode = 1
)

// String returns "none" or "sum".
func (m CheckMode) String() string {
	switch m {
	case CheckNone:
		return "none"
	case CheckSum:
		return "sum"
	}
	return fmt.Sprintf("CheckMode(%d)", int(m))
}

// ParseCheckMode accepts "none" and "sum", case-insensitively.
func ParseCheckMode(s string) (CheckMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "none":
		return CheckNone, nil
	case "sum":
		return CheckSum, nil
	}
	return 0, fmt.Errorf("unknown check mode %q (want none or sum)", s)
}

func (m CheckMode) valid() bool { return m == CheckNone || m == CheckSum }

// headerLen returns the bytes a header occupies in a file of mode m.
func (m CheckMode) headerLen() int {
	if m == CheckSum {
		return FramedHeaderSize
	}
	return HeaderSize
}

// Header is HugeCTR's DataSetHeader (SPEC §2.1).
type Header struct {
	ErrorCheck int64 // 0 = CheckNone, 1 = CheckSum
	NumRecords int64 // number_of_records
	LabelDim   int64
	DenseDim   int64
	SlotNum    int64 // total slots over all sparse inputs
	// Reserved holds the three reserved words, written 0 by HugeCTR and
	// ctrkit; kept so a file re-encodes byte for byte.
	Reserved [3]int64
}

// ParseHeader decodes the header at the start of src, framed when m is
// CheckSum, and returns it with the number of bytes it occupies (64 or 69).
// It checks the framing (length 64, check byte) and that error_check agrees
// with m; the fields' plausibility against a file size and a schema is the
// caller's (see Header.Validate). Errors are *formats.Error values with
// Offset 0 and Record -1 and an empty Path, which the caller fills in.
func ParseHeader(src []byte, m CheckMode) (Header, int, error) {
	var h Header
	if !m.valid() {
		return h, 0, fmt.Errorf("invalid check mode %d", int(m))
	}
	n := m.headerLen()
	if len(src) < n {
		return h, 0, formats.Truncated("norm", "", 0, -1, "header")
	}
	p := src[:HeaderSize]
	if m == CheckSum {
		if l := int32(binary.LittleEndian.Uint32(src)); l != HeaderSize {
			if binary.LittleEndian.Uint64(src) == 0 {
				return h, 0, formats.Errorf("norm", "", 0, -1, formats.ErrHeader, "error_check is 0 (file has no checksum framing), reader configured for sum")
			}
			return h, 0, formats.Errorf("norm", "", 0, -1, formats.ErrHeader, "header frame length %d, want %d", l, HeaderSize)
		}
		p = src[4 : 4+HeaderSize]
		if got, want := src[4+HeaderSize], checksum(p); got != want {
			return h, 0, formats.Errorf("norm", "", 0, -1, formats.ErrChecksum, "header check byte %#02x, payload sums to %#02x", got, want)
		}
	}
	h.ErrorCheck = int64(binary.LittleEndian.Uint64(p[0:]))
	h.NumRecords = int64(binary.LittleEndian.Uint64(p[8:]))
	h.LabelDim = int64(binary.LittleEndian.Uint64(p[16:]))
	h.DenseDim = int64(binary.LittleEndian.Uint64(p[24:]))
	h.SlotNum = int64(binary.LittleEndian.Uint64(p[32:]))
	for i := range h.Reserved {
		h.Reserved[i] = int64(binary.LittleEndian.Uint64(p[40+8*i:]))
	}
	if h.ErrorCheck != int64(m) {
		if m == CheckNone && binary.LittleEndian.Uint32(src) == HeaderSize {
			return h, 0, formats.Errorf("norm", "", 0, -1, formats.ErrHeader, "file starts with a checksum frame (40 00 00 00), reader configured for none")
		}
		return h, 0, formats.Errorf("norm", "", 0, -1, formats.ErrHeader, "error_check %d, reader configured for %s (%d)", h.ErrorCheck, m, int(m))
	}
	return h, n, nil
}

// AppendHeader appends the encoded header to dst, framed when m is CheckSum
// (h.ErrorCheck is written as given).
func AppendHeader(dst []byte, h Header, m CheckMode) []byte {
	if m == CheckSum {
		dst = binary.LittleEndian.AppendUint32(dst, HeaderSize)
	}
	start := len(dst)
	for _, v := range [...]int64{h.ErrorCheck, h.NumRecords, h.LabelDim, h.DenseDim, h.SlotNum, h.Reserved[0], h.Reserved[1], h.Reserved[2]} {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(v))
	}
	if m == CheckSum {
		dst = append(dst, checksum(dst[start:]))
	}
	return dst
}

// maxDim bounds label_dim, dense_dim and slot_num read from a header so that
// sample sizes computed from them cannot overflow.
const maxDim = formats.MaxDim

// Validate checks the header's counts against a schema (when s is not nil)
// and against the size of the file holding it (when size ≥ 0): each of
// label_dim, dense_dim and slot_num must equal the schema's, and
// number_of_records samples of the smallest possible size must fit in the
// file. Errors are *formats.Error values wrapping formats.ErrHeader (or
// ErrSize for the record count) with Path empty.
func (h *Header) Validate(s *formats.Schema, m CheckMode, size int64) error {
	bad := func(field string, v int64, want string) error {
		e := formats.Errorf("norm", "", 0, -1, formats.ErrHeader, "%s = %d, %s", field, v, want)
		e.Op = "header " + field
		return e
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"label_dim", h.LabelDim}, {"dense_dim", h.DenseDim}, {"slot_num", h.SlotNum}} {
		if f.v < 0 || f.v > maxDim {
			return bad(f.name, f.v, fmt.Sprintf("want 0..%d", maxDim))
		}
	}
	if h.LabelDim+h.DenseDim+h.SlotNum == 0 {
		return bad("slot_num", 0, "and label_dim = dense_dim = 0: empty sample")
	}
	if s != nil {
		if h.LabelDim != int64(s.LabelDim) {
			return bad("label_dim", h.LabelDim, fmt.Sprintf("schema has %d", s.LabelDim))
		}
		if h.DenseDim != int64(s.DenseDim) {
			return bad("dense_dim", h.DenseDim, fmt.Sprintf("schema has %d", s.DenseDim))
		}
		if h.SlotNum != int64(len(s.Slots)) {
			return bad("slot_num", h.SlotNum, fmt.Sprintf("schema has %d slots", len(s.Slots)))
		}
	}
	if h.NumRecords < 0 {
		return bad("number_of_records", h.NumRecords, "want ≥ 0")
	}
	if size >= 0 {
		min := h.minRecordLen(m)
		room := size - int64(m.headerLen())
		if room < 0 || h.NumRecords > room/min {
			e := formats.Errorf("norm", "", 0, -1, formats.ErrHeader,
				"number_of_records = %d, but %d bytes after the header hold at most %d records of ≥ %d bytes", h.NumRecords, max(room, 0), max(room, 0)/min, min)
			e.Op = "header number_of_records"
			return e
		}
	}
	return nil
}

// minRecordLen is the size of a record whose slots are all empty.
func (h *Header) minRecordLen(m CheckMode) int64 {
	n := 4 * (h.LabelDim + h.DenseDim + h.SlotNum)
	if m == CheckSum {
		n += FrameOverhead
	}
	return n
}

// Schema returns the schema a header describes: slot_num unbounded slots
// (MaxNNZ 0) named C1.., keys of type kt.
func (h *Header) Schema(kt formats.KeyType) formats.Schema {
	s := formats.NewSchema(int(h.LabelDim), int(h.DenseDim), make([]int, h.SlotNum), nil, kt)
	return s
}

// checksum returns the sum of p's bytes mod 256, eight bytes at a time.
func checksum(p []byte) byte {
	var acc uint64
	for len(p) >= foldBlock {
		acc += foldLanes(p[:foldBlock])
		p = p[foldBlock:]
	}
	acc += foldLanes(p)
	for _, c := range p[len(p)&^7:] {
		acc += uint64(c)
	}
	return byte(acc)
}

// foldBlock bounds one foldLanes call: each 16-bit lane gathers two bytes
// (≤ 510) per word, so 128 words (1024 bytes) cannot overflow a lane.
const foldBlock = 8 * 128

// foldLanes returns the byte sum of the whole 8-byte words of p,
// len(p) ≤ foldBlock+7.
func foldLanes(p []byte) uint64 {
	const m = 0x00ff00ff00ff00ff
	var lanes uint64
	for len(p) >= 8 {
		x := binary.LittleEndian.Uint64(p)
		lanes += x&m + (x>>8)&m
		p = p[8:]
	}
	return lanes&0xffff + lanes>>16&0xffff + lanes>>32&0xffff + lanes>>48
}

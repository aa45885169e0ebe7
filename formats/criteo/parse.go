package criteo

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/ctrkit/ctrkit/formats"
)

// Missing is the categorical value of an empty field (see CatValue).
const Missing uint64 = math.MaxUint64

// Sample is one parsed line, before categorical mapping. Dense and Cat must
// be sized by the caller: len(Dense) is the number of integer columns and
// len(Cat) the number of categorical columns ParseLine expects.
type Sample struct {
	// Label is the label column as float32 (0 or 1 in Criteo logs).
	Label float32
	// Dense holds the integer columns, clamped to the int32 range; a missing
	// value is 0. formats.DenseFromInt32 turns them into batch values.
	Dense []int32
	// Cat holds CatValue of each categorical column.
	Cat []uint64
}

// ParseLine parses one line (without its '\n'; a trailing '\r' is ignored)
// of fields separated by sep into s, and returns how many dense values it
// clamped to the int32 range. A wrong field count is an error wrapping
// formats.ErrSchema, a bad label or dense value one wrapping formats.ErrValue;
// the message names and quotes the field. ParseLine does not allocate unless
// a number needs the slow path (exponents, unusual spellings) or the line is
// bad.
func ParseLine(s *Sample, line []byte, sep byte) (clamped int, err error) {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	nd, nc := len(s.Dense), len(s.Cat)
	want := 1 + nd + nc
	pos := 0
	for i := 0; i < want; i++ {
		end := pos
		for end < len(line) && line[end] != sep {
			end++
		}
		if (end < len(line)) != (i < want-1) {
			return clamped, fieldCountError(line, sep, want)
		}
		f := line[pos:end]
		pos = end + 1
		switch {
		case i == 0:
			v, ok := parseLabel(f)
			if !ok {
				return clamped, valueError(i, nd, f, "label is not a finite number")
			}
			s.Label = v
		case i <= nd:
			v, c, ok := parseDense(f)
			if !ok {
				return clamped, valueError(i, nd, f, "not an integer")
			}
			if c {
				clamped++
			}
			s.Dense[i-1] = v
		default:
			s.Cat[i-1-nd] = CatValue(f)
		}
	}
	return clamped, nil
}

func fieldCountError(line []byte, sep byte, want int) error {
	return fmt.Errorf("%w: line has %d fields, want %d (%s)", formats.ErrSchema,
		bytes.Count(line, []byte{sep})+1, want, quote(line))
}

func valueError(i, nd int, f []byte, what string) error {
	return fmt.Errorf("%w: field %d (%s) %s: %s", formats.ErrValue, i, columnName(i, nd), quote(f), what)
}

// columnName names field i of a line with nd dense columns: label, I1.., C1...
func columnName(i, nd int) string {
	switch {
	case i == 0:
		return "label"
	case i <= nd:
		return "I" + strconv.Itoa(i)
	}
	return "C" + strconv.Itoa(i-nd)
}

// quote quotes b for an error message, clipped to 40 bytes.
func quote(b []byte) string {
	const max = 40
	if len(b) > max {
		return strconv.Quote(string(b[:max])) + "…"
	}
	return strconv.Quote(string(b))
}

func parseLabel(f []byte) (float32, bool) {
	if len(f) == 1 && (f[0] == '0' || f[0] == '1') {
		return float32(f[0] - '0'), true
	}
	if len(f) == 0 {
		return 0, false
	}
	x, err := strconv.ParseFloat(string(f), 64)
	if err != nil || math.IsInf(x, 0) || math.IsNaN(x) || math.Abs(x) > math.MaxFloat32 {
		return 0, false
	}
	return float32(x), true
}

// parseDense parses an integer, or a float spelling of an integer ("260.0",
// "2.6e2"), clamping it to the int32 range. Empty is 0.
func parseDense(f []byte) (x int32, clamped, ok bool) {
	if len(f) == 0 {
		return 0, false, true
	}
	i, neg := 0, false
	if f[0] == '-' || f[0] == '+' {
		neg, i = f[0] == '-', 1
	}
	var v uint64
	digits := 0
	for ; i < len(f) && f[i] >= '0' && f[i] <= '9'; i++ {
		if v < 1<<40 {
			v = v*10 + uint64(f[i]-'0')
		}
		digits++
	}
	if digits == 0 {
		return parseDenseSlow(f)
	}
	if i < len(f) {
		if f[i] != '.' {
			return parseDenseSlow(f)
		}
		for i++; i < len(f); i++ {
			if f[i] != '0' {
				return parseDenseSlow(f)
			}
		}
	}
	if neg {
		if v > 1<<31 {
			return math.MinInt32, true, true
		}
		return int32(-int64(v)), false, true
	}
	if v > math.MaxInt32 {
		return math.MaxInt32, true, true
	}
	return int32(v), false, true
}

func parseDenseSlow(f []byte) (int32, bool, bool) {
	s := string(f)
	if strings.ContainsAny(s, "xX_") { // no hex floats or digit separators
		return 0, false, false
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false, false
	}
	if math.IsNaN(x) || math.IsInf(x, 0) && err == nil || x != math.Trunc(x) {
		return 0, false, false
	}
	switch {
	case x > math.MaxInt32:
		return math.MaxInt32, true, true
	case x < math.MinInt32:
		return math.MinInt32, true, true
	}
	return int32(x), false, true
}

// CatValue returns the value of a categorical field: Missing for an empty
// field; the number itself for exactly 8 hex digits (either case), the form
// of Criteo's logs, so a value is < 2^32; otherwise the FNV-1a 64 hash of the
// bytes with bit 63 set (never equal to a hex value; Missing-1 stands in for
// the one hash equal to Missing).
func CatValue(f []byte) uint64 {
	if len(f) == 0 {
		return Missing
	}
	if len(f) == 8 {
		var v, bad uint32
		for _, c := range f {
			d := hexDigit[c]
			bad |= d
			v = v<<4 | d&15
		}
		if bad&0x100 == 0 {
			return uint64(v)
		}
	}
	h := uint64(14695981039346656037)
	for _, c := range f {
		h ^= uint64(c)
		h *= 1099511628211
	}
	h |= 1 << 63
	if h == Missing {
		h--
	}
	return h
}

// hexDigit maps a hex digit to its value and any other byte to 0x100.
var hexDigit = func() (t [256]uint32) {
	for i := range t {
		switch c := byte(i); {
		case c >= '0' && c <= '9':
			t[i] = uint32(c - '0')
		case c >= 'a' && c <= 'f':
			t[i] = uint32(c-'a') + 10
		case c >= 'A' && c <= 'F':
			t[i] = uint32(c-'A') + 10
		default:
			t[i] = 0x100
		}
	}
	return t
}()

// Hash maps a categorical value to a slot-local key in [0, buckets): Missing
// to 0, any other value v to 1 + mix(v) mod (buckets−1), mix being the
// SplitMix64 finalizer. buckets must be ≥ 2.
func Hash(v uint64, buckets int64) int64 {
	if v == Missing {
		return 0
	}
	return 1 + int64(mix64(v)%uint64(buckets-1))
}

func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// isHeader reports whether line is a header: its first field is not a number.
func isHeader(line []byte, sep byte) bool {
	f := line
	if j := bytes.IndexByte(line, sep); j >= 0 {
		f = line[:j]
	}
	f = bytes.TrimSuffix(f, []byte{'\r'})
	_, ok := parseLabel(f)
	return !ok
}

// checkHeader verifies a header line: 1+nd+nc fields named label, I1..Ind,
// C1..Cnc (ASCII case ignored); with anyNames only the count is checked.
func checkHeader(line []byte, sep byte, nd, nc int, anyNames bool) error {
	line = bytes.TrimSuffix(line, []byte{'\r'})
	fields := bytes.Split(line, []byte{sep})
	if len(fields) != 1+nd+nc {
		return fmt.Errorf("%w: header has %d columns, want %d (%s)", formats.ErrSchema, len(fields), 1+nd+nc, quote(line))
	}
	if anyNames {
		return nil
	}
	for i, f := range fields {
		if want := columnName(i, nd); !strings.EqualFold(string(f), want) {
			return fmt.Errorf("%w: header column %d is %s, want %q", formats.ErrSchema, i, quote(f), want)
		}
	}
	return nil
}

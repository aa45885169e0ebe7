package graph

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// rd is the reader's state: the file name and the first error (sticky, so
// field accessors need no error plumbing; the caller checks r.err once).
type rd struct {
	file string
	err  error
	// layer names the dense layer being read ("InnerProduct fc1") for
	// errors that must name it.
	layer string
	// seen holds the JSON path of every key the reader looked up (present
	// or not); asked the keys looked up per object path (did-you-mean
	// candidates).
	seen  map[string]bool
	asked map[string][]string
}

func newRd(file string) *rd {
	return &rd{file: file, seen: map[string]bool{}, asked: map[string][]string{}}
}

func (r *rd) fail(path string, sentinel error, format string, args ...any) {
	if r.err == nil {
		r.err = errorf(r.file, path, sentinel, format, args...)
	}
}

// node is a JSON object being read, with its path for errors.
type node struct {
	r    *rd
	path string
	m    map[string]any
}

func (n node) at(k string) string {
	if n.path == "" {
		return k
	}
	return n.path + "." + k
}

func idx(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// get looks up k, recording the lookup (unknown keys are those never
// looked up).
func (n node) get(k string) (any, bool) {
	if n.r.seen != nil {
		p := n.at(k)
		if !n.r.seen[p] {
			n.r.seen[p] = true
			n.r.asked[n.path] = append(n.r.asked[n.path], k)
		}
	}
	v, ok := n.m[k]
	return v, ok
}

// val is get without the presence flag.
func (n node) val(k string) any { v, _ := n.get(k); return v }

func (n node) has(k string) bool { _, ok := n.get(k); return ok }

// accept marks keys that are valid and need no reading (layer "name").
func (n node) accept(keys ...string) {
	for _, k := range keys {
		n.get(k)
	}
}

func (n node) missing(k string) { n.r.fail(n.at(k), ErrMissing, "required key %q missing", k) }

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func (n node) wrong(path, want string, v any) {
	n.r.fail(path, ErrType, "want %s, have %s", want, typeName(v))
}

// str reads a required string.
func (n node) str(k string) string {
	v, ok := n.get(k)
	if !ok {
		n.missing(k)
		return ""
	}
	s, ok := v.(string)
	if !ok {
		n.wrong(n.at(k), "string", v)
	}
	return s
}

func (n node) optStr(k, def string) string {
	if !n.has(k) {
		return def
	}
	return n.str(k)
}

func (n node) numInt(path string, v any) int64 {
	num, ok := v.(json.Number)
	if !ok {
		n.wrong(path, "integer", v)
		return 0
	}
	if i, err := strconv.ParseInt(string(num), 10, 64); err == nil {
		return i
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<62 {
		n.r.fail(path, ErrValue, "want an integer, have %s", num)
		return 0
	}
	return int64(f)
}

func (n node) numFloat(path string, v any) float64 {
	num, ok := v.(json.Number)
	if !ok {
		n.wrong(path, "number", v)
		return 0
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil {
		n.r.fail(path, ErrValue, "bad number %s", num)
	}
	return f
}

// int64 reads a required integer.
func (n node) int64(k string) int64 {
	v, ok := n.get(k)
	if !ok {
		n.missing(k)
		return 0
	}
	return n.numInt(n.at(k), v)
}

func (n node) optInt64(k string, def int64) int64 {
	if !n.has(k) {
		return def
	}
	return n.int64(k)
}

// count reads a required non-negative int that fits in an int.
func (n node) count(k string) int {
	v := n.int64(k)
	if v < 0 || v > math.MaxInt32 {
		n.r.fail(n.at(k), ErrValue, "%d out of range [0, %d]", v, math.MaxInt32)
		return 0
	}
	return int(v)
}

func (n node) optCount(k string, def int) int {
	if !n.has(k) {
		return def
	}
	return n.count(k)
}

func (n node) float(k string) float64 {
	v, ok := n.get(k)
	if !ok {
		n.missing(k)
		return 0
	}
	return n.numFloat(n.at(k), v)
}

func (n node) optFloat(k string, def float64) float64 {
	if !n.has(k) {
		return def
	}
	return n.float(k)
}

func (n node) f32(k string) float32 { return float32(n.float(k)) }

func (n node) optF32(k string, def float32) float32 {
	if !n.has(k) {
		return def
	}
	return n.f32(k)
}

// optBool reads a bool, also accepting 0/1 (HugeCTR reads some as int).
func (n node) optBool(k string, def bool) bool {
	v, ok := n.get(k)
	if !ok {
		return def
	}
	switch b := v.(type) {
	case bool:
		return b
	case json.Number:
		i := n.numInt(n.at(k), v)
		return i != 0
	}
	n.wrong(n.at(k), "bool", v)
	return def
}

func (n node) obj(k string) node {
	v, ok := n.get(k)
	if !ok {
		n.missing(k)
		return node{r: n.r, path: n.at(k), m: map[string]any{}}
	}
	return n.asObj(n.at(k), v)
}

func (n node) asObj(path string, v any) node {
	m, ok := v.(map[string]any)
	if !ok {
		n.wrong(path, "object", v)
		m = map[string]any{}
	}
	return node{r: n.r, path: path, m: m}
}

func (n node) optObj(k string) (node, bool) {
	if !n.has(k) {
		return node{r: n.r, path: n.at(k), m: map[string]any{}}, false
	}
	return n.obj(k), true
}

func (n node) arr(k string) []any {
	v, ok := n.get(k)
	if !ok {
		n.missing(k)
		return nil
	}
	a, ok := v.([]any)
	if !ok {
		n.wrong(n.at(k), "array", v)
	}
	return a
}

// names reads a tensor-name list: a string or an array of strings.
func (n node) names(k string) []string {
	v, ok := n.get(k)
	if !ok {
		n.missing(k)
		return nil
	}
	return n.strList(n.at(k), v)
}

func (n node) strList(path string, v any) []string {
	switch s := v.(type) {
	case string:
		return []string{s}
	case []any:
		out := make([]string, len(s))
		for i, e := range s {
			str, ok := e.(string)
			if !ok {
				n.wrong(idx(path, i), "string", e)
			}
			out[i] = str
		}
		return out
	}
	n.wrong(path, "string or array of strings", v)
	return nil
}

// ints reads an array of integers (a scalar is a one-element array).
func (n node) ints(k string) []int64 {
	v, ok := n.get(k)
	if !ok {
		n.missing(k)
		return nil
	}
	a, ok := v.([]any)
	if !ok {
		return []int64{n.numInt(n.at(k), v)}
	}
	out := make([]int64, len(a))
	for i, e := range a {
		out[i] = n.numInt(idx(n.at(k), i), e)
	}
	return out
}

func (n node) counts(k string) []int {
	v := n.ints(k)
	out := make([]int, len(v))
	for i, x := range v {
		if x < 0 || x > math.MaxInt32 {
			n.r.fail(idx(n.at(k), i), ErrValue, "%d out of range", x)
		}
		out[i] = int(x)
	}
	return out
}

func (n node) f32s(k string) []float32 {
	a := n.arr(k)
	out := make([]float32, len(a))
	for i, e := range a {
		out[i] = float32(n.numFloat(idx(n.at(k), i), e))
	}
	return out
}

// oneOf checks that s is one of the allowed values.
func (n node) oneOf(k, s string, allowed ...string) {
	for _, a := range allowed {
		if s == a {
			return
		}
	}
	n.r.fail(n.at(k), ErrValue, "%q is not one of %q%s", s, allowed, didYouMean(s, allowed))
}

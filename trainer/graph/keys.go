package graph

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/ctrkit/ctrkit/internal/suggest"
)

// checkUnknown fails on the first key of v (the file's top-level value, at
// path) that the reader never looked up: a misspelt key would otherwise
// be dropped without a word. The message suggests the nearest key the
// reader knows at that place.
func (r *rd) checkUnknown(path string, v any) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := k
			if path != "" {
				p = path + "." + k
			}
			if !r.seen[p] {
				r.fail(p, ErrValue, "unknown key %q%s", k, r.suggest(path, k))
				return
			}
			r.checkUnknown(p, x[k])
			if r.err != nil {
				return
			}
		}
	case []any:
		for i, e := range x {
			r.checkUnknown(idx(path, i), e)
			if r.err != nil {
				return
			}
		}
	}
}

// suggest returns " (did you mean "x"?)" for the known key at path nearest
// to k, or the list of keys known there when none is near.
func (r *rd) suggest(path, k string) string {
	known := r.asked[path]
	best, bestD := "", len(k)
	for _, c := range known {
		if d := suggest.Distance(strings.ToLower(k), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	if best != "" && bestD <= max(2, len(k)/3) {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	if len(known) == 0 {
		return ""
	}
	s := append([]string(nil), known...)
	sort.Strings(s)
	return fmt.Sprintf(" (keys known here: %s)", strings.Join(s, ", "))
}

// lineCol returns the 1-based line and column (in bytes) of byte offset off
// of data.
func lineCol(data []byte, off int64) (int, int) {
	off = min(max(off, 0), int64(len(data)))
	head := data[:off]
	line := 1 + bytes.Count(head, []byte("\n"))
	col := int(off) - (bytes.LastIndexByte(head, '\n') + 1) + 1
	return line, col
}

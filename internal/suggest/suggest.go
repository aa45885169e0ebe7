// Package suggest finds the closest of a set of names to a mistyped one,
// for "did you mean" hints (commands, flags, config keys).
package suggest

// Distance is the Levenshtein distance of a and b, in bytes.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Nearest returns the name of known nearest to name (case-insensitive)
// when it is near enough to be a typo: at most max(2, len(name)/3) edits.
func Nearest(name string, known []string) (string, bool) {
	best, bestD := "", len(name)+1
	for _, c := range known {
		if d := Distance(lower(name), lower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	return best, best != "" && bestD <= max(2, len(name)/3)
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

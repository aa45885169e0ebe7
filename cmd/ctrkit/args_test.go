package main

import (
	"slices"
	"testing"
)

func TestPermuteArgs(t *testing.T) {
	app := newApp()
	for _, tc := range []struct{ in, want []string }{
		{[]string{"ctrkit", "convert", "a", "b", "--to", "raw", "--i64-input-key", "--num-slot=3"},
			[]string{"ctrkit", "convert", "--to", "raw", "--i64-input-key", "--num-slot=3", "a", "b"}},
		{[]string{"ctrkit", "keyset", "--out", "x", "p"}, []string{"ctrkit", "keyset", "--out", "x", "p"}},
		{[]string{"ctrkit", "keyset", "p", "--", "--odd"}, []string{"ctrkit", "keyset", "p", "--", "--odd"}},
		{[]string{"ctrkit", "nosuch", "a", "--x"}, []string{"ctrkit", "nosuch", "a", "--x"}},
	} {
		if got := permuteArgs(app, tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("permuteArgs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

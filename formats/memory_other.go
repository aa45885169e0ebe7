//go:build !unix

package formats

func addressSpaceLeft() (int64, bool) { return 0, false }

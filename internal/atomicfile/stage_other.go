//go:build !linux

package atomicfile

import "errors"

// exchange is not available: Commit renames the old directory aside first.
func exchange(a, b string) error { return errors.ErrUnsupported }

func mountPoint(dir string) bool { return false }

//go:build !linux

package bench

import (
	"errors"
	"time"
)

// CPUTime is unknown (0) on this system.
func CPUTime() time.Duration { return 0 }

// CachedFraction is unknown (-1) on this system.
func CachedFraction(paths []string) float64 { return -1 }

// DropCache is not supported on this system.
func DropCache(paths []string) error {
	return errors.New("dropping the page cache is not supported on this system")
}

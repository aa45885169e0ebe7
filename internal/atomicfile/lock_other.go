//go:build !unix

package atomicfile

import "os"

// tryLock has no flock here: temporary outputs are not locked, and none is
// taken for a killed run's (removeStale removes nothing).
func tryLock(path string) *os.File { return nil }

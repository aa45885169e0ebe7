package main

import (
	"runtime/debug"
)

// benchGCPercent is the garbage collector's target percentage during `bench
// read` when the user has not set GOGC: the readers allocate their buffers
// (a Parquet row group of 65536–131072 Criteo rows is 17–35 MB, several per
// worker) in the first fraction of a second, and at GOGC=100 the heap's
// growth from a few MB to a few hundred triggered five collections in a
// one-epoch read of 1 M rows, each stopping every decoding goroutine twice
// (stop-the-world phases of up to 20 ms on a loaded machine). At 400 it is
// two. The readers allocate little per batch after that, so the heap stays
// near its live size.
const benchGCPercent = 400

// setBenchGC applies benchGCPercent unless GOGC is set in env, and returns
// the function that restores the previous setting.
func setBenchGC(getenv func(string) string) (restore func()) {
	if getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(benchGCPercent)
	return func() { debug.SetGCPercent(old) }
}

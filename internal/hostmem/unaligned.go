package hostmem

import "runtime"

// UnalignedLoads reports whether this architecture loads and stores a
// multi-byte value at any byte address at the speed of an aligned one
// (x86 and arm64), so that a decoder may view values in place at an odd
// offset (a Parquet page's values after its levels or header) rather than
// copy them to aligned memory first. The gc compiler emits plain loads for
// such views, and Go's checkptr allows misaligned pointers to types that
// hold no pointers (golang.org/issue/37298). Elsewhere a misaligned load
// may trap or be emulated, and decoders copy.
const UnalignedLoads = runtime.GOARCH == "amd64" || runtime.GOARCH == "386" || runtime.GOARCH == "arm64"

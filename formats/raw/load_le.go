//go:build 386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm

package raw

import "unsafe"

// ld32 loads a little-endian uint32 from p (any alignment).
func ld32(p unsafe.Pointer) uint32 { return *(*uint32)(p) }

// ld64 loads a little-endian uint64 from p (any alignment).
func ld64(p unsafe.Pointer) uint64 { return *(*uint64)(p) }

// nativeLE reports whether bytes can be copied as host words.
const nativeLE = true

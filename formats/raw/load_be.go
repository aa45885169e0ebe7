//go:build !(386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm)

package raw

import (
	"encoding/binary"
	"unsafe"
)

func ld32(p unsafe.Pointer) uint32 { return binary.LittleEndian.Uint32(unsafe.Slice((*byte)(p), 4)) }

func ld64(p unsafe.Pointer) uint64 { return binary.LittleEndian.Uint64(unsafe.Slice((*byte)(p), 8)) }

const nativeLE = false

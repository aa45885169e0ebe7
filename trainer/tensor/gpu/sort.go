package gpu

import "github.com/ctrkit/ctrkit/trainer/cuda"

// Device-wide primitives written for ctrkit (kernels/sort.cu, no CUB): an
// exclusive scan, index compaction and a stable LSD radix sort of (key,
// u32 value) pairs. They run inside be.do on memory carved from
// be.workspace by a primArena.

const (
	primThreads = 256             // PRIM_THREADS in sort.cu
	primTile    = primThreads * 8 // PRIM_TILE: elements per block of the tiled kernels
)

// primTiles is the grid of a tiled kernel over n elements (at least one
// block, so a scan of nothing still writes its total).
func primTiles(n int) int { return max(1, (n+primTile-1)/primTile) }

// primArena carves one operation's workspace into 256-byte aligned
// buffers. Lay the buffers out once on a zero arena to learn the size
// (off), then again on the workspace base.
type primArena struct {
	base cuda.Ptr
	off  int
}

func (a *primArena) take(bytes int) cuda.Ptr {
	p := a.base.Add(a.off)
	a.off += (bytes + 255) &^ 255
	return p
}

// primWorkspace lays out with layout twice (sizing, then on the
// workspace) and returns the workspace base.
func (be *Backend) primWorkspace(c *cuda.Ctx, layout func(a *primArena)) error {
	var a primArena
	layout(&a)
	base, err := be.workspace(c, a.off)
	if err != nil {
		return err
	}
	layout(&primArena{base: base})
	return nil
}

// primScanKind selects the scan's element types.
type primScanKind int

const (
	primU32 primScanKind = iota // u32 → u32
	primF2D                     // float32 → float64
)

var primScanNames = [2][3]string{
	{"prim_scan_reduce_u32", "prim_scan_part_u32", "prim_scan_down_u32"},
	{"prim_scan_reduce_f2d", "prim_scan_part_f2d", "prim_scan_down_f2d"},
}

// primScanPart is the scratch of a scan of n elements, in elements of the
// output type.
func primScanPart(n int) int { return primTiles(n) }

// scan writes the exclusive prefix sums of in[0,n) to out[0,n) and the
// total to out[n]. part holds primScanPart(n) output elements; in may equal
// out for primU32.
func (be *Backend) scan(c *cuda.Ctx, k primScanKind, in, out cuda.Ptr, n int, part cuda.Ptr) error {
	nb := primTiles(n)
	names := &primScanNames[k]
	if err := be.launch(c, names[0], cuda.D1(nb), cuda.D1(primThreads), 0, in, part, int64(n)); err != nil {
		return err
	}
	if err := be.launch(c, names[1], cuda.D1(1), cuda.D1(primThreads), 0, part, int64(nb)); err != nil {
		return err
	}
	return be.launch(c, names[2], cuda.D1(nb), cuda.D1(primThreads), 0, in, out, part, int64(n))
}

// compact writes the indices i < n with flag[i] ≠ 0, ascending, to
// out[0, pos[n]): pos (n+1 u32) receives the exclusive scan of the flags.
func (be *Backend) compact(c *cuda.Ctx, flag, pos, out cuda.Ptr, n int, part cuda.Ptr) error {
	if err := be.scan(c, primU32, flag, pos, n, part); err != nil {
		return err
	}
	return be.launch1(c, "prim_compact_idx", n, flag, pos, out, int64(n))
}

// primSort is the workspace of a radix sort of up to n pairs: two key
// buffers (u32, or u64 when wide), two u32 value buffers (absent when
// sorting keys only), the (digit, tile) histogram and scan scratch.
type primSort struct {
	n          int
	wide       bool
	keys, vals [2]cuda.Ptr
	hist, part cuda.Ptr
	diff       cuda.Ptr // u64: OR of key ^ key[0]
}

func newPrimSort(a *primArena, n int, wide, withVals bool) primSort {
	s := primSort{n: n, wide: wide}
	ks := 4
	if wide {
		ks = 8
	}
	s.keys[0], s.keys[1] = a.take(ks*n), a.take(ks*n)
	if withVals {
		s.vals[0], s.vals[1] = a.take(4*n), a.take(4*n)
	}
	h := 256 * primTiles(n)
	s.hist = a.take(4 * (h + 1))
	s.part = a.take(4 * primScanPart(h))
	s.diff = a.take(8)
	return s
}

// run sorts keys[0] (with vals[0]) stably by key bits [0, bits) and returns
// the index of the buffers holding the result (ceil(bits/8) passes, each
// swapping buffers). count, a device u32 (0: none), limits the sort to the
// first min(*count, n) pairs. Passes whose digit is the same for every key
// are reduced to a copy on the device.
func (s *primSort) run(be *Backend, c *cuda.Ctx, count cuda.Ptr, bits int) (int, error) {
	if s.n == 0 {
		return 0, nil
	}
	sfx := "_u32"
	if s.wide {
		sfx = "_u64"
	}
	if err := c.Memset8(s.diff, 0, 8, be.s); err != nil {
		return 0, err
	}
	if err := be.launch1(c, "prim_rs_diff"+sfx, s.n, s.keys[0], count, int64(s.n), s.diff); err != nil {
		return 0, err
	}
	nb := primTiles(s.n)
	src := 0
	for shift := 0; shift < bits; shift += 8 {
		dst := 1 - src
		if err := be.launch(c, "prim_rs_hist"+sfx, cuda.D1(nb), cuda.D1(primThreads), 0,
			s.keys[src], count, int64(s.n), shift, s.diff, s.hist); err != nil {
			return 0, err
		}
		if err := be.scan(c, primU32, s.hist, s.hist, 256*nb, s.part); err != nil {
			return 0, err
		}
		if err := be.launch(c, "prim_rs_scatter"+sfx, cuda.D1(nb), cuda.D1(primThreads), 0,
			s.keys[src], s.keys[dst], s.vals[src], s.vals[dst], count, int64(s.n), shift, s.diff, s.hist); err != nil {
			return 0, err
		}
		src = dst
	}
	return src, nil
}

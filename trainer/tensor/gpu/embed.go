package gpu

import (
	"math"
	"unsafe"

	"github.com/ctrkit/ctrkit/trainer/cuda"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// The embedding group (kernels/embed.cu): HashLookup, SlotRows,
// EmbeddingBag, EmbeddingBagGrad and AUC. CSR offsets are not validated on
// the device (the CPU checks them); the kernels clamp bag ranges to the
// keys so bad offsets cannot fault.

// EmbeddingBagGrad cuts segments longer than embLong occurrences at the
// 64-position windows of the sorted order (hot rows, see embed.cu; embLong
// is that window); a segment of more than embFinTeam pieces is finished by
// a block of embFinbThreads (EMB_FINB_THREADS) instead of one team.
const (
	embLong        = 64
	embFinTeam     = 32
	embFinbThreads = 1024
)

// embed.cu's windows are 64 positions (shifts by 6): embLong must match.
var _ [embLong - 64]struct{}
var _ [64 - embLong]struct{}

// HashLookup maps keys to rows, inserting missing keys when asked. Insert
// is: probe (miss flags) → compaction of the missing keys → 64-bit radix
// sort → ranks of the distinct keys by a scan of run heads → atomicCAS
// insert at Count + rank (nothing when Count would exceed MaxRows) → Count
// update → probe again at the missed positions. Count stays on the device.
// The insert writes RowKeys[row] = key; SkipKey of a Sharded table is
// neither looked up nor missing (row −1).
// The key→row map equals the CPU's; the slot layout of Keys may differ
// (concurrent inserts).
func (be *Backend) HashLookup(h tensor.HashTable, keys, rows tensor.Tensor, insert bool) {
	const op = "hash_lookup"
	if !be.owned(op, h.Keys, h.Rows, h.Count, h.RowKeys, keys, rows) || !be.check(tensor.CheckHashTable(op, h, keys, rows)) {
		return
	}
	capy := h.Keys.Len()
	n := keys.Len()
	if n == 0 {
		return
	}
	mask := uint64(capy - 1)
	tk, tr, cnt := p(h.Keys), p(h.Rows), p(h.Count)
	sharded := 0
	if h.Sharded {
		sharded = 1
	}
	be.do(op, func(c *cuda.Ctx) error {
		if !insert {
			return be.launch1(c, "emb_hash_probe", n, tk, tr, mask, p(keys), p(rows), cuda.Ptr(0), int64(n), be.flag, opHashLookup, sharded)
		}
		var miss, pos, upos, part cuda.Ptr
		var srt primSort
		err := be.primWorkspace(c, func(a *primArena) {
			miss = a.take(4 * n)
			pos = a.take(4 * (n + 1))
			upos = a.take(4 * (n + 1))
			part = a.take(4 * primScanPart(n))
			srt = newPrimSort(a, n, true, false)
		})
		if err != nil {
			return err
		}
		nmiss := pos.Add(4 * n) // device u32: the number of missing keys
		if err := be.launch1(c, "emb_hash_probe", n, tk, tr, mask, p(keys), p(rows), miss, int64(n), be.flag, opHashLookup, sharded); err != nil {
			return err
		}
		if err := be.scan(c, primU32, miss, pos, n, part); err != nil {
			return err
		}
		if err := be.launch1(c, "emb_hash_gather", n, p(keys), miss, pos, srt.keys[0], int64(n)); err != nil {
			return err
		}
		i, err := srt.run(be, c, nmiss, 64)
		if err != nil {
			return err
		}
		mk := srt.keys[i]
		if err := be.launch1(c, "emb_hash_heads", n, mk, nmiss, upos, int64(n)); err != nil {
			return err
		}
		if err := be.scan(c, primU32, upos, upos, n, part); err != nil {
			return err
		}
		if err := be.launch1(c, "emb_hash_insert", n, tk, tr, mask, cnt, h.MaxRows, mk, upos, nmiss, int64(n), be.flag, opHashLookup,
			p(h.RowKeys)); err != nil {
			return err
		}
		if err := be.launch(c, "emb_hash_count", cuda.D1(1), cuda.D1(32), 0, cnt, upos, int64(n), be.flag); err != nil {
			return err
		}
		return be.launch1(c, "emb_hash_reprobe", n, tk, tr, mask, p(keys), p(rows), int64(n))
	})
}

// SlotRows computes one-hot rows (key + slot offset), one thread per bag;
// a key outside its slot is ErrRange at the next Sync.
func (be *Backend) SlotRows(rows, keys, offsets, slotOffsets, slotSizes tensor.Tensor) {
	const op = "slot_rows"
	if !be.owned(op, rows, keys, offsets, slotOffsets, slotSizes) ||
		!be.check(tensor.CheckSlotRows(op, rows, keys, offsets, slotOffsets, slotSizes)) {
		return
	}
	bags, ns := offsets.Len()-1, slotOffsets.Len()
	if bags == 0 && keys.Len() > 0 { // the CPU's CSR check, without reading offsets
		be.fail(op, tensor.ErrShape, "%d bags for %d slots", bags, ns)
		return
	}
	if bags == 0 {
		return
	}
	be.do(op, func(c *cuda.Ctx) error {
		return be.launch1(c, "emb_slot_rows", bags, p(rows), p(keys), p(offsets), p(slotOffsets), p(slotSizes),
			int64(bags), ns, int64(keys.Len()), be.flag, opSlotRows)
	})
}

// RecordSlots records the slot of rows seen for the first time (the
// smallest slot of their occurrences in this call): one thread per bag
// takes atomicMin of MinInt32+slot on rows still negative, then one thread
// per position turns those pending values into slots. A row beyond
// rowSlots is ErrRange at the next Sync.
func (be *Backend) RecordSlots(rowSlots, rows, offsets tensor.Tensor, numSlots int) {
	const op = "record_slots"
	if !be.owned(op, rowSlots, rows, offsets) || !be.check(tensor.CheckRecordSlots(op, rowSlots, rows, offsets, numSlots)) {
		return
	}
	bags, nnz := offsets.Len()-1, rows.Len()
	if bags == 0 && nnz > 0 {
		be.fail(op, tensor.ErrShape, "%d bags for %d slots", bags, numSlots)
		return
	}
	if bags == 0 || nnz == 0 {
		return
	}
	be.do(op, func(c *cuda.Ctx) error {
		if err := be.launch1(c, "emb_record_slots", bags, p(rowSlots), p(rows), p(offsets), int64(bags), numSlots,
			int64(nnz), rowSlots.Len(), be.flag, opRecordSlots); err != nil {
			return err
		}
		return be.launch1(c, "emb_finish_slots", nnz, p(rowSlots), p(rows), int64(nnz), rowSlots.Len())
	})
}

// embPtr is an operand of a team kernel: its address and element size.
type embPtr struct {
	p    cuda.Ptr
	size int
}

// embOp is t as a team kernel operand.
func embOp(t tensor.Tensor) embPtr { return embPtr{p(t), t.DType.Size()} }

// embTeam is the team shape for V-wide vectors: W = 4 (one access of 4
// elements: 16 bytes of float32, 8 of halves) when V % 4 == 0 and every
// pointer is aligned to 4 of its elements, else 1; ts lanes (a power of
// two ≤ 32) cover ⌈V/W⌉ columns.
func embTeam(v int, ptrs ...embPtr) (w, ts int) {
	w = 1
	if v%4 == 0 {
		w = 4
		for _, q := range ptrs {
			if q.p%cuda.Ptr(4*q.size) != 0 {
				w = 1
			}
		}
	}
	need := (v + w - 1) / w
	ts = 1
	for ts < need && ts < 32 {
		ts <<= 1
	}
	return w, ts
}

// launchTeams runs a team kernel (name + "_v1"/"_v4") over items teams of ts
// lanes (grid-stride beyond 32 blocks per SM).
func (be *Backend) launchTeams(c *cuda.Ctx, name string, w, ts, items int, args ...any) error {
	if w == 4 {
		name += "_v4"
	} else {
		name += "_v1"
	}
	blocks := min((items*ts+255)/256, be.sms*32)
	return be.launch(c, name, cuda.D1(max(blocks, 1)), cuda.D1(256), 0, args...)
}

// embKernel is the name of team kernel name for an operand of t's dtype
// (embed.cu's per-type kernels: _f16, _bf16; float32 has no suffix).
func embKernel(name string, t tensor.Tensor) string {
	switch t.DType {
	case tensor.Float16:
		return name + "_f16"
	case tensor.BFloat16:
		return name + "_bf16"
	}
	return name
}

// embHalves checks the operands of EmbeddingBag and EmbeddingBagGrad: act
// (the pooled output or its gradient) Float32, Float16 or BFloat16, f32
// (the table, or the per-row gradient sums) Float32.
func (be *Backend) embHalves(op string, act, f32 tensor.Tensor, actName, f32Name string) bool {
	if !be.owned(op, act, f32) {
		return false
	}
	if f32.Buf != nil && f32.DType != tensor.Float32 {
		be.fail(op, tensor.ErrDType, "%s %v: embedding tables and their gradients are float32 on the GPU", f32Name, f32)
		return false
	}
	if act.Buf != nil && act.DType != tensor.Float32 && !act.DType.IsHalf() {
		be.fail(op, tensor.ErrDType, "%s %v (float32, float16 or bfloat16 on the GPU)", actName, act)
		return false
	}
	return true
}

func embMean(c tensor.Combiner) int {
	if c == tensor.Mean {
		return 1
	}
	return 0
}

// embFwdBags is the bags per team of EmbeddingBag (EMB_FWD_BAGS).
const embFwdBags = 4

// EmbeddingBag pools table rows per bag, one team per embFwdBags bags (their
// rows four loads ahead, each added to its bag in order); a row ≥ the
// table's rows is ErrRange at the next Sync. The table is Float32; out may
// be Float32, Float16 or BFloat16: the float32 sum (or mean) rounded once,
// so a half out is the float32 out rounded, bit for bit.
func (be *Backend) EmbeddingBag(out, table, rows, offsets tensor.Tensor, c tensor.Combiner) {
	const op = "embedding_bag"
	if !be.embHalves(op, out, table, "out", "table") || !be.owned(op, rows, offsets) ||
		!be.check(tensor.CheckEmbeddingBag(op, out, table, rows, offsets)) {
		return
	}
	bags := offsets.Len() - 1
	v := table.Cols()
	if bags == 0 && rows.Len() > 0 {
		be.fail(op, tensor.ErrShape, "out %v for %d bags of table %v", out, bags, table)
		return
	}
	if bags == 0 || v == 0 {
		return
	}
	w, ts := embTeam(v, embOp(out), embOp(table))
	name := embKernel("emb_bag_fwd", out)
	be.do(op, func(x *cuda.Ctx) error {
		return be.launchTeams(x, name, w, ts, (bags+embFwdBags-1)/embFwdBags, p(out), p(table), p(rows),
			p(offsets), int64(bags), v, table.Rows(), embMean(c), ts, int64(rows.Len()), be.flag, opEmbedding)
	})
}

// EmbeddingBagGrad aggregates per distinct row: pairs (row+1, bag) are
// radix-sorted stably (bits bounded on the device by the keys' spread), run
// heads are scanned into segments, and each distinct row's occurrences are
// summed in order (hot rows in chunks, see embed.cu). numUniq stays on the
// device and every grid is sized by nnz, so nothing here waits for the host
// (the step can be captured in a CUDA graph).
//
// Kernels for nnz occurrences: prep, the sort (a diff kernel and per 8-bit
// pass a histogram, a 3-kernel scan and a scatter; passes whose digit is the
// same in every key only copy), heads, scan, rle, the short-segment sums,
// the hot-row piece sums (which also list the long segments) and the two
// finishing kernels (one team, or one block for the hottest rows).
//
// dOut may be Float32, Float16 or BFloat16 (read widened to float32);
// uniqGrad is Float32, summed in the same order whatever dOut's dtype, so a
// half dOut gives the uniqGrad of the float32 dOut holding its values, bit
// for bit.
func (be *Backend) EmbeddingBagGrad(uniqRows, uniqGrad, numUniq, dOut, rows, offsets tensor.Tensor, c tensor.Combiner) {
	const op = "embedding_bag_grad"
	if !be.embHalves(op, dOut, uniqGrad, "dOut", "uniqGrad") || !be.owned(op, uniqRows, numUniq, rows, offsets) ||
		!be.check(tensor.CheckEmbeddingBagGrad(op, uniqRows, uniqGrad, numUniq, dOut, rows, offsets)) {
		return
	}
	bags, nnz := offsets.Len()-1, rows.Len()
	v := uniqGrad.Cols()
	if bags == 0 && nnz > 0 {
		be.fail(op, tensor.ErrShape, "dOut %v, %d bags, %d keys, uniq %v %v", dOut, bags, nnz, uniqRows, uniqGrad)
		return
	}
	if nnz == 0 {
		be.do(op, func(x *cuda.Ctx) error { return x.Memset32(p(numUniq), 0, 1, be.s) })
		return
	}
	n := nnz
	pieces := 2 * ((n + embLong - 1) / embLong) // two per window
	maxLong := n/(embLong+1) + 1                // segments of more than embLong occurrences
	// A segment of L occurrences meets at most ⌊(L−2)/64⌋ + 2 windows, so
	// one of more than embFinTeam pieces has L > (embFinTeam−2)·64.
	maxHot := n/((embFinTeam-2)*embLong) + 1
	be.do(op, func(x *cuda.Ctx) error {
		var srt primSort
		var hpos, seg, list0, list1, nl, partial, part cuda.Ptr
		err := be.primWorkspace(x, func(a *primArena) {
			srt = newPrimSort(a, n, false, true)
			hpos = a.take(4 * (n + 1))
			seg = a.take(4 * (n + 1))
			list0 = a.take(4 * maxLong)
			list1 = a.take(4 * maxHot)
			nl = a.take(4 * 2)
			partial = a.take(4 * pieces * v)
			part = a.take(4 * primScanPart(n))
		})
		if err != nil {
			return err
		}
		w, ts := embTeam(v, embOp(dOut), embOp(uniqGrad), embPtr{partial, 4})
		if err := be.launch1(x, "emb_grad_prep", bags, p(rows), p(offsets), int64(bags), int64(n), srt.keys[0], srt.vals[0]); err != nil {
			return err
		}
		i, err := srt.run(be, x, 0, 32)
		if err != nil {
			return err
		}
		keys, bag := srt.keys[i], srt.vals[i]
		if err := be.launch1(x, "emb_grad_heads", n, keys, hpos, int64(n)); err != nil {
			return err
		}
		if err := be.scan(x, primU32, hpos, hpos, n, part); err != nil {
			return err
		}
		if err := be.launch1(x, "emb_grad_rle", n+1, keys, hpos, p(uniqRows), seg, p(numUniq), nl, int64(n)); err != nil {
			return err
		}
		if v == 0 {
			return nil
		}
		mean := embMean(c)
		if err := be.launchTeams(x, embKernel("emb_grad_sum", dOut), w, ts, n, p(uniqGrad), p(dOut), bag, p(offsets), seg, p(numUniq),
			v, mean, ts, embLong); err != nil {
			return err
		}
		// Hot rows: piece sums (and the lists of long segments) → per-row
		// sums of the partials.
		if err := be.launchTeams(x, embKernel("emb_grad_chunk", dOut), w, ts, pieces, partial, p(dOut), bag, p(offsets), keys, hpos, seg,
			list0, list1, nl, int64(n), v, mean, ts, embFinTeam); err != nil {
			return err
		}
		if err := be.launchTeams(x, "emb_grad_fin", w, ts, maxLong, p(uniqGrad), partial, seg, list0, nl, v, ts); err != nil {
			return err
		}
		name := "emb_grad_finb_v1"
		if w == 4 {
			name = "emb_grad_finb_v4"
		}
		return be.launch(x, name, cuda.D1(min(maxHot, be.sms)), cuda.D1(embFinbThreads), 0,
			p(uniqGrad), partial, seg, list1, nl, v, ts)
	})
}

// aucKeyNaN reports whether k, a score key of emb_auc_prep, is a NaN's:
// keys above +Inf's (0xff800000) or below −Inf's (0x007fffff).
func aucKeyNaN(k uint32) bool { return k > 0xff800000 || k < 0x007fffff }

// AUC is the exact ROC AUC on the device: radix sort of (score key, label)
// pairs, a float64 scan of the sorted labels, compaction of the tie-group
// boundaries and a float64 reduction over the groups (metrics.AUC's
// formula); one 32-byte download at the end. NaN when a class has no
// weight or a score is NaN (as metrics.AUC). Scores and labels may be
// Float32, Float16 or BFloat16 (their values, widened exactly).
func (be *Backend) AUC(scores, labels tensor.Tensor) (float64, error) {
	const op = "auc"
	if !be.halves(op, scores, labels) || !be.check(tensor.CheckSameLen(op, scores, labels)) {
		return 0, be.err
	}
	n := scores.Len()
	if n == 0 {
		return math.NaN(), be.err
	}
	groups := min((n+256)/256, be.sms*4) // emb_auc_area's grid: fixed, so the sum order is too
	var res [3]float64
	var lo, hi uint32 // smallest and largest sorted keys
	be.do(op, func(c *cuda.Ctx) error {
		var srt primSort
		var pre, flag, bpos, bidx, part, gpart, out cuda.Ptr
		err := be.primWorkspace(c, func(a *primArena) {
			srt = newPrimSort(a, n, false, true)
			pre = a.take(8 * (n + 1))
			flag = a.take(4 * (n + 1))
			bpos = a.take(4 * (n + 2))
			bidx = a.take(4 * (n + 1))
			part = a.take(8 * primScanPart(n+1))
			gpart = a.take(8 * groups)
			out = a.take(8 * 3)
		})
		if err != nil {
			return err
		}
		if err := be.launch1(c, "emb_auc_prep", n, p(scores), dt(scores), p(labels), dt(labels), srt.keys[0], srt.vals[0], int64(n)); err != nil {
			return err
		}
		i, err := srt.run(be, c, 0, 32)
		if err != nil {
			return err
		}
		keys, lab := srt.keys[i], srt.vals[i]
		if err := be.scan(c, primF2D, lab, pre, n, part); err != nil {
			return err
		}
		if err := be.launch1(c, "emb_auc_bounds", n+1, keys, flag, int64(n)); err != nil {
			return err
		}
		if err := be.compact(c, flag, bpos, bidx, n+1, part); err != nil {
			return err
		}
		if err := be.launch(c, "emb_auc_area", cuda.D1(groups), cuda.D1(256), 0, pre, bidx, bpos.Add(4*(n+1)), gpart); err != nil {
			return err
		}
		if err := be.launch(c, "emb_auc_final", cuda.D1(1), cuda.D1(256), 0, pre, gpart, groups, int64(n), out); err != nil {
			return err
		}
		hb, err := be.staging(c, 32)
		if err != nil {
			return err
		}
		if err := c.DtoH(unsafe.Pointer(&hb[0]), out, 24, be.s); err != nil {
			return err
		}
		// The smallest and largest sorted keys: a NaN score sorts below
		// −Inf (negative NaN) or above +Inf (positive NaN).
		if err := c.DtoH(unsafe.Pointer(&hb[24]), keys, 4, be.s); err != nil {
			return err
		}
		if err := c.DtoH(unsafe.Pointer(&hb[28]), keys.Add(4*(n-1)), 4, be.s); err != nil {
			return err
		}
		if err := c.StreamSync(be.s); err != nil {
			return err
		}
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&res[0])), 24), hb[:24])
		lo = *(*uint32)(unsafe.Pointer(&hb[24]))
		hi = *(*uint32)(unsafe.Pointer(&hb[28]))
		return nil
	})
	if err := be.Sync(); err != nil {
		return 0, err
	}
	if aucKeyNaN(lo) || aucKeyNaN(hi) {
		return math.NaN(), nil
	}
	area, pos, neg := res[0], res[1], res[2]
	if pos == 0 || neg == 0 {
		return math.NaN(), nil
	}
	return area / (pos * neg), nil
}

package tensor

// Sharded embedding tables: the package doc's "Sharded embedding tables".

// SkipKey marks a key another rank owns (MaskKeys' output). It is
// reserved like EmptyKey: a Sharded HashTable maps it to row −1 and never
// inserts it; any other table refuses it.
const SkipKey = EmptyKey + 1

// Philox counter tags (the counter's fourth word) of initial rows.
const (
	InitTagHash   uint32 = 0x48415348 // "HASH"
	InitTagOneHot uint32 = 0x4f4e4548 // "ONEH"
)

// InitUniform is u of the initial-row formula (package doc, "Initial
// rows of embedding tables"): the uniform [0, 1) number of element j of
// the row with identity id.
func InitUniform(seed uint64, tag uint32, id int64, j int) float32 {
	w := Philox4x32([4]uint32{uint32(id), uint32(uint64(id) >> 32), uint32(j / 4), tag},
		[2]uint32{uint32(seed), uint32(seed >> 32)})
	return float32(w[j&3]>>8) * (1.0 / (1 << 24))
}

// InitValue32 is the float32 initial value of element j of row id in
// U(−a, a) (package doc, "Initial rows of embedding tables"),
// bit-identical to the kernel's.
func InitValue32(seed uint64, tag uint32, id int64, j int, a float64) float32 {
	u := InitUniform(seed, tag, id, j)
	a32 := float32(a)
	t := float32((a32 + a32) * u)
	return float32(t - a32)
}

// InitValue64 is the float64 initial value of element j of row id.
func InitValue64(seed uint64, tag uint32, id int64, j int, a float64) float64 {
	u := float64(InitUniform(seed, tag, id, j))
	return float64((a+a)*u) - a
}

// InitRow32 fills dst (one row) with InitValue32 of row id for j =
// 0…len(dst)−1, one Philox block per four elements.
func InitRow32(dst []float32, seed uint64, tag uint32, id int64, a float64) {
	a32 := float32(a)
	k := [2]uint32{uint32(seed), uint32(seed >> 32)}
	for q := 0; q < len(dst); q += 4 {
		w := Philox4x32([4]uint32{uint32(id), uint32(uint64(id) >> 32), uint32(q / 4), tag}, k)
		for e := 0; e < 4 && q+e < len(dst); e++ {
			u := float32(w[e]>>8) * (1.0 / (1 << 24))
			t := float32((a32 + a32) * u)
			dst[q+e] = float32(t - a32)
		}
	}
}

// InitRow64 is InitRow32 for float64 rows (InitValue64).
func InitRow64(dst []float64, seed uint64, tag uint32, id int64, a float64) {
	k := [2]uint32{uint32(seed), uint32(seed >> 32)}
	for q := 0; q < len(dst); q += 4 {
		w := Philox4x32([4]uint32{uint32(id), uint32(uint64(id) >> 32), uint32(q / 4), tag}, k)
		for e := 0; e < 4 && q+e < len(dst); e++ {
			u := float64(float32(w[e]>>8) * (1.0 / (1 << 24)))
			dst[q+e] = float64((a+a)*u) - a
		}
	}
}

// ShardOps are the operations behind sharded embedding tables.
type ShardOps interface {
	// MaskKeys writes dst[j] = keys[j] when position j is owned by rank of
	// world ranks, else SkipKey. bySlot: the slot of j is bag(j) mod
	// numSlots under CSR offsets int32 [bags+1], owned when slot mod world
	// == rank (Localized embeddings); otherwise the key is owned when
	// floorMod(key, world) == rank (DistributedSlot) and offsets and
	// numSlots are not used (offsets may be the zero Tensor). A key equal to
	// EmptyKey or SkipKey is ErrRange naming its position. dst and keys
	// are int64 of one length; dst may alias keys.
	MaskKeys(dst, keys, offsets Tensor, numSlots, rank, world int, bySlot bool)
	// InitHashRows initialises the rows a training lookup just inserted:
	// every row r in [first[0], h.Count[0]) (first int32 [1], Count copied
	// there before the inserting HashLookup, so nothing waits for the host)
	// gets table[r, j] = the initial value of key h.RowKeys[r], element j
	// (package doc, "Initial rows of embedding tables", tag InitTagHash),
	// with bound a = bound, or slotBound[rowSlots[r]] when slotBound is not
	// the zero Tensor (per-slot bounds; rowSlots int32 [table rows],
	// slotBound of the table's float dtype [slots]; ErrRange for a row
	// without a slot).
	// Rows outside the range (loaded or trained) are not touched.
	InitHashRows(table Tensor, h HashTable, first Tensor, seed uint64, bound float64, rowSlots, slotBound Tensor)
}

// CheckMaskKeys checks MaskKeys' operands: int64 dst and keys of one
// length, a rank in [0, world), and for bySlot int32 offsets of whole
// samples of numSlots bags.
func CheckMaskKeys(op string, dst, keys, offsets Tensor, numSlots, rank, world int, bySlot bool) error {
	if dst.DType != Int64 || keys.DType != Int64 || dst.Len() != keys.Len() {
		return Errorf(op, ErrShape, "%v ← %v: want int64 of one length", dst, keys)
	}
	if world <= 0 || rank < 0 || rank >= world {
		return Errorf(op, ErrShape, "rank %d of %d ranks", rank, world)
	}
	if !bySlot {
		return nil
	}
	if err := CheckWant(op, offsets, Int32, 1); err != nil {
		return err
	}
	if numSlots <= 0 || (offsets.Len()-1)%numSlots != 0 {
		return Errorf(op, ErrShape, "%d bags for %d slots", offsets.Len()-1, numSlots)
	}
	return nil
}

// CheckInitHashRows checks InitHashRows' operands: a table of at least
// h.MaxRows rows, RowKeys present, first int32 [1], and with slotBound a
// rowSlots of the table's rows and a slotBound of the table's dtype.
func CheckInitHashRows(op string, table Tensor, h HashTable, first, rowSlots, slotBound Tensor) error {
	if table.Rows() < h.MaxRows || h.RowKeys.DType != Int64 || h.RowKeys.Len() < h.MaxRows {
		return Errorf(op, ErrShape, "table %v, row keys %v for %d rows", table, h.RowKeys, h.MaxRows)
	}
	if err := firstErr(CheckWant(op, first, Int32, 1), CheckWant(op, h.Count, Int32, 1)); err != nil {
		return err
	}
	if slotBound.IsZero() {
		return nil
	}
	if slotBound.DType != table.DType || slotBound.Len() == 0 {
		return Errorf(op, ErrShape, "slot bounds %v for table %v", slotBound, table)
	}
	return CheckWant(op, rowSlots, Int32, h.MaxRows)
}

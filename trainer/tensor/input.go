package tensor

// SparseSlots names the slots of a batch that form one sparse input of a
// network: slots [First, First+Slots) of the batch's slot order.
type SparseSlots struct{ First, Slots int }

// InputSplitter is a backend that builds a network's sparse inputs from a
// batch's keys where the batch lies (on the device for the GPU), so the
// host never repacks keys: 32-bit keys widen to int64, slot offsets are
// added once, and the batch's CSR over all its slots is split into one CSR
// per input.
type InputSplitter interface {
	// SplitInputs reads a batch of n samples over S slots: keys (Uint32 or
	// Int64, at least offsets[n·S] of them) and offsets (Int32 [n·S+1], the
	// batch's CSR, bag i·S+s for sample i's slot s). add and size are Int64
	// [S]: every key of slot s becomes key + add[s], and when size[s] > 0
	// the key (before the add) must lie in [0, size[s]) (else ErrRange,
	// reported at the next Sync on the GPU). Input k takes the slots
	// inputs[k]: dstKeys[k] (Int64) receives its keys in sample, slot
	// order and dstOffsets[k] (Int32 [B·Slots+1] for B ≥ n) its CSR, the
	// samples from n to B empty. The caller checks beforehand that each
	// input's keys fit dstKeys[k] (InputKeyCounts).
	SplitInputs(dstKeys, dstOffsets []Tensor, keys, offsets, add, size Tensor, inputs []SparseSlots, n int)
}

// OneHotSplitter is an InputSplitter with a path for one-hot batches,
// whose bag j (sample j/S, slot j%S) holds key j alone (offsets[j] = j,
// OneHot): each input's CSR is then its bags' positions and each key goes
// to its own bag, so the batch's CSR is neither scanned nor read (nor
// uploaded). SplitOneHot gives what SplitInputs gives for such a batch;
// keys holds at least n·S of them. It also makes copies, in the same
// device work: a staged batch's labels and dense values, so that a
// one-hot batch's whole commit is one launch on the GPU.
type OneHotSplitter interface {
	SplitOneHot(dstKeys, dstOffsets []Tensor, keys, add, size Tensor, inputs []SparseSlots, n int, copies []Copy)
}

// A Copy is Src copied into Dst (Backend.Copy's operands: one dtype and
// length), made alongside other work (OneHotSplitter).
type Copy struct{ Dst, Src Tensor }

// OneHot reports whether the CSR off (of len(off)-1 bags) gives every bag
// one key, in order: off[j] = j. A pass over the offsets on the host.
func OneHot(off []int32) bool {
	for j, v := range off {
		if v != int32(j) {
			return false
		}
	}
	return len(off) > 0
}

// InputKeyCounts returns the number of keys of each input (the inputs'
// NNZ) of a batch of n samples over S slots with CSR offsets off: host
// work of n reads per input, no copy.
func InputKeyCounts(dst []int, off []int32, n, S int, inputs []SparseSlots) []int {
	dst = dst[:0]
	for _, in := range inputs {
		if in.First == 0 && in.Slots == S {
			dst = append(dst, int(off[n*S]))
			continue
		}
		c := 0
		for i := 0; i < n; i++ {
			c += int(off[i*S+in.First+in.Slots] - off[i*S+in.First])
		}
		dst = append(dst, c)
	}
	return dst
}

// SplitOneHotOperands lists SplitOneHot's tensors (for a backend's
// ownership check).
func SplitOneHotOperands(dstKeys, dstOffsets []Tensor, keys, add, size Tensor, copies []Copy) []Tensor {
	ts := append(append([]Tensor{keys, add, size}, dstKeys...), dstOffsets...)
	for _, c := range copies {
		ts = append(ts, c.Dst, c.Src)
	}
	return ts
}

// CheckSplitOneHot checks SplitOneHot's operands: those of SplitInputs
// but the offsets, keys holding at least n·S, and the copies'.
func CheckSplitOneHot(op string, dstKeys, dstOffsets []Tensor, keys, add, size Tensor, inputs []SparseSlots, n int, copies []Copy) error {
	if err := checkSplit(op, dstKeys, dstOffsets, keys, add, size, inputs, n); err != nil {
		return err
	}
	for _, c := range copies {
		if err := CheckCopy(op, c.Dst, c.Src); err != nil {
			return err
		}
	}
	if S := add.Len(); keys.Len() < n*S {
		return Errorf(op, ErrShape, "%d keys for %d one-hot samples of %d slots", keys.Len(), n, S)
	}
	for k, in := range inputs {
		if dstKeys[k].Len() < n*in.Slots {
			return Errorf(op, ErrShape, "input %d: room for %d keys, %d one-hot samples of %d slots", k, dstKeys[k].Len(), n, in.Slots)
		}
	}
	return nil
}

// CheckSplitInputs checks SplitInputs' operands.
func CheckSplitInputs(op string, dstKeys, dstOffsets []Tensor, keys, offsets, add, size Tensor, inputs []SparseSlots, n int) error {
	if err := CheckWant(op, offsets, Int32, 1); err != nil {
		return err
	}
	if S := add.Len(); n < 0 || offsets.Len() < n*S+1 {
		return Errorf(op, ErrShape, "%d offsets for %d samples of %d slots", offsets.Len(), n, S)
	}
	return checkSplit(op, dstKeys, dstOffsets, keys, add, size, inputs, n)
}

// checkSplit checks the operands SplitInputs and SplitOneHot share.
func checkSplit(op string, dstKeys, dstOffsets []Tensor, keys, add, size Tensor, inputs []SparseSlots, n int) error {
	S := add.Len()
	if keys.DType != Uint32 && keys.DType != Int64 {
		return Errorf(op, ErrDType, "keys are %v, want Uint32 or Int64", keys.DType)
	}
	if err := firstErr(CheckWant(op, add, Int64, 0), CheckWant(op, size, Int64, S)); err != nil {
		return err
	}
	if n < 0 {
		return Errorf(op, ErrShape, "%d samples", n)
	}
	if len(dstKeys) != len(inputs) || len(dstOffsets) != len(inputs) {
		return Errorf(op, ErrShape, "%d key and %d offset tensors for %d inputs", len(dstKeys), len(dstOffsets), len(inputs))
	}
	for k, in := range inputs {
		if in.First < 0 || in.Slots <= 0 || in.First+in.Slots > S {
			return Errorf(op, ErrShape, "input %d takes slots [%d, %d) of %d", k, in.First, in.First+in.Slots, S)
		}
		if err := firstErr(CheckWant(op, dstKeys[k], Int64, 0), CheckWant(op, dstOffsets[k], Int32, 1)); err != nil {
			return err
		}
		if bags := dstOffsets[k].Len() - 1; bags%in.Slots != 0 || bags/in.Slots < n {
			return Errorf(op, ErrShape, "input %d: %d bags for %d samples of %d slots", k, bags, n, in.Slots)
		}
	}
	return nil
}

// HostAllocator hands out host memory (formats.Allocator has the same
// methods): Alloc returns n bytes aligned to at least 64, Free releases them.
type HostAllocator interface {
	Alloc(n int) ([]byte, error)
	Free(b []byte)
}

// Stager is a backend that uploads batches from pinned host memory on a
// copy stream of its own while the compute stream trains (the GPU).
type Stager interface {
	// PinnedAllocator allocates host memory that stages without a copy.
	PinnedAllocator() HostAllocator
	// NewStaging returns a Staging for inputs shaped like dsts (dtype and
	// capacity of each staging buffer); stageTypes[k], when not Invalid,
	// is the host dtype staged for input k instead.
	NewStaging(dsts []Tensor, stageTypes []DType) (Staging, error)
}

// Staging is a double-buffered upload: Stage (one goroutine) copies host
// buffers into a free staging slot; Commit (the training goroutine) makes
// the compute stream wait for them, copies them into dsts (a zero Tensor
// skips an entry) and, when then is not nil, calls it with the staged
// buffers (each the prefix staged) for work that reads them on the compute
// stream before the slot is reused. Commit with no dsts and a nil then
// releases a slot unused. Close frees the slots.
type Staging interface {
	Stage(srcs [][]byte) (slot int, err error)
	Commit(slot int, dsts []Tensor, then func(staged []Tensor))
	Close() error
}

// DeviceMemory is a backend whose tensors live in memory of its own (a
// GPU's), not the process's: host memory checks leave its tensors out,
// its operations (AUC's sort) run there, and MemInfo reports the device's
// free and total bytes for callers that keep data on it (cached
// evaluation batches).
type DeviceMemory interface {
	MemInfo() (free, total int64, err error)
}

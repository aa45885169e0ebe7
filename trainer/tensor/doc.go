// Package tensor is the device-agnostic core of ctrkit's trainer: a tensor
// handle (dtype, shape, backend-owned storage) and the Backend interface of
// batched operations every layer, optimizer and metric is written against.
//
// # Layout
//
// Every tensor is dense and row-major. Layers see activations as a matrix
// [rows, cols] = [batch, features]; a 3-D activation [B, S, V] (an
// embedding output: B samples, S slots, V-wide vectors) is the same bytes as
// the matrix [B, S·V], so Reshape is free (it shares storage):
//
//	row b:  | slot 0: v0 … v(V-1) | slot 1: v0 … v(V-1) | … | slot S-1 |
//
// Weights of an InnerProduct are W [in, out] row-major and bias [out], the
// layout SPEC §7 writes to the dense model file, so y = x·W + b is
// Gemm(false, false, 1, x, W, 0, y) followed by AddBias.
//
// Sparse inputs travel as CSR over (sample, slot) bags: Offsets int32
// [B·S+1] with Offsets[b·S+s] the first key of sample b, slot s, and Keys
// int64 [nnz]. The embedding turns keys into table rows (int32 [nnz]) with a
// hash table (HashLookup) or slot offsets (SlotRows), then pools rows per bag
// (EmbeddingBag).
//
// # Execution model
//
// A Backend is a stream: operations are issued in order from one goroutine
// and may run asynchronously; the first failure (a shape mismatch, a full
// hash table, an out-of-range row) is sticky, turns every later operation
// into a no-op, and is returned by Err, Sync and Download. This is how CUDA
// reports errors (launches are asynchronous, errors surface at
// synchronization), so layer code needs no error plumbing per operation and a
// GPU backend never waits for the host between kernels. Download is the only
// operation that moves data to the host; nothing in a training step needs it
// (the loss and the count of unique embedding rows stay in device tensors).
//
// # Backends
//
// The CPU backend (package cpu) stores tensors in Go slices and runs every
// operation on all cores; it supports Float64 storage as well, which the
// trainer's tests use as the float64 reference (the same layer code runs
// with Float64 tensors for finite-difference gradient checks). The CUDA
// backend (package gpu) maps each operation onto one cuBLAS call (Gemm: row-major C = A·B
// is column-major Cᵀ = Bᵀ·Aᵀ, so it calls cublasSgemm with the operands
// swapped) or one or two NVRTC kernels over the whole batch; the
// data-dependent operations (HashLookup, EmbeddingBagGrad) are specified as
// sort / scan / segmented reduction so they have deterministic GPU
// implementations, and Dropout draws its mask from Philox-4x32-10 keyed by a
// seed and counter so both backends produce the same mask.
//
// How each operation maps onto CUDA (one launch per call unless stated):
//
//	Alloc/Free/Fill/Copy     cuMemAlloc, cuMemFree, cuMemsetD32Async / fill kernel, cuMemcpyDtoDAsync
//	Upload/Download          cuMemcpyHtoDAsync from pinned memory / cuMemcpyDtoH + stream sync
//	Gemm                     cublasSgemm(opB, opA, N, M, K, α, B, ldb, A, lda, β, C, N);
//	                         cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_TF32 for TF32;
//	                         InnerProduct's forward fuses bias+ReLU (cuBLASLt epilogue)
//	AddBias, BiasAct         elementwise kernel (the fused InnerProduct epilogue)
//	ColSum, Reduce, RowDot   block reduction kernel (or cublasSgemv with a ones vector)
//	Act/ActGrad/Axpby/Mul    elementwise kernels
//	RowScale, Broadcast      elementwise kernels with index arithmetic
//	CopyCols                 2-D strided copy kernel (cuMemcpy2DAsync when beta = 0)
//	SumSquares/SumAbs        reduction into a device scalar; SignAxpy elementwise
//	HashLookup               probe kernel; compaction + radix sort (kernels/sort.cu) +
//	                         unique of misses; insert kernel (atomicCAS on Keys, row =
//	                         Count+rank); Count and the miss count never leave the device
//	SlotRows                 one thread per bag
//	MaskKeys                 one thread per key (by key) or per bag (by slot)
//	InitHashRows             fixed grid over (new row, 4 columns), range read on the device
//	EmbeddingBag             one warp per bag, lanes over the vector
//	EmbeddingBagGrad         radix sort of (row, position) pairs, run-length encode,
//	                         one warp per distinct row summing its occurrences in order;
//	                         hot rows in chunks of 64, finished by a warp or a block
//	Interaction(+Grad)       one block per sample: its n+1 vectors in shared memory,
//	                         2×2 register tiles of F·Fᵀ, one coalesced output row
//	FmOrder2(+Grad)          one thread per (sample, column)
//	BatchNorm(+Grad)         column-reduction kernels (double partials, fixed order)
//	Dropout(+Grad)           elementwise Philox kernel (mask recomputed, not stored)
//	Softmax, BCE, SoftmaxCE  row kernels; loss reduced into a device scalar
//	MaskedBCE                BCE's kernel with labels < −0.5 masked (MultiCrossEntropyLoss)
//	DenseUpdate              elementwise kernel, scalars (lr, bias correction) as args
//	SparseUpdate             one warp per unique row (Local, LazyGlobal) or a
//	                         row-map + elementwise kernel over the table (Global),
//	                         16-byte accesses when V % 4 == 0;
//	                         numUniq is read on the device, never by the host
//	AUC                      device radix sort by score + double scan + tie groups
//
// # Sharded embedding tables
//
// Several ranks can each hold some rows of one table (ShardOps, issue #19).
// A global batch of B_g samples is split over W ranks, but every rank sees
// the sparse keys of the whole global batch and pools its own rows for all
// B_g·S bags (foreign keys contribute zero), giving a partial output the
// trainer reduces over the ranks. Ownership is HugeCTR's:
//
//   - DistributedSlotSparseEmbeddingHash: key k lives on rank floorMod(k, W);
//   - LocalizedSlot…Hash and …OneHot: slot s lives on rank s mod W.
//
// MaskKeys replaces the keys a rank does not own by SkipKey, which a
// Sharded HashTable maps to row −1 without inserting it.
//
// # Initial rows of embedding tables
//
// A rank count must not change the numbers, so a row's initial values (on
// one rank as on many)
// depend only on the seed and the row's identity, never on where it lands:
// a hash row on its key (InitHashRows, on the device, for the rows a
// training lookup inserted), a one-hot row on its global row index
// (host-side at build). Element j of the row with identity id is
//
//	w   = Philox4x32(ctr = (uint32(id), uint32(id>>32), uint32(j/4), tag),
//	                 key = (uint32(seed), uint32(seed>>32)))[j mod 4]
//	u   = float32(w >> 8) · 2⁻²⁴                       (exact, in [0, 1))
//	a32 = float32(a)
//	v   = round32(round32((a32+a32) · u) − a32)        (float32 tables)
//	v   = (a+a)·u − a, in float64                      (float64 tables)
//
// with round32 round-to-nearest-even to float32 after each operation
// (__fmul_rn, __fadd_rn on the GPU; an explicit float32 conversion in Go,
// which forbids fused multiply-add), so CPU and GPU give the same bits. tag
// is InitTagHash for hash rows and InitTagOneHot for one-hot rows; a is
// the table's bound (U(−a, a), the distribution the single-device trainer
// always used: 0.05 for hash tables, √(1/slot_size) per slot for one-hot
// tables and for LocalizedHash tables with a slot_size_array).
package tensor

package model

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/ctrkit/ctrkit/trainer/collective"
	"github.com/ctrkit/ctrkit/trainer/layers"
	"github.com/ctrkit/ctrkit/trainer/tensor"
)

// Model files over several ranks (docs/MULTI_GPU.md, "Model files").
//
// The files are HugeCTR's whatever the rank count, byte for byte: a sparse
// directory lists its rows in ascending key order (rowsKeys), the one order
// that does not depend on how the keys were spread over ranks or when they
// were first seen. Saving is collective — every rank of the group calls
// Save — and rank 0 writes:
//
//   - the dense files from its own weights (every rank holds the same);
//   - each sharded embedding's rows gathered from all ranks: the row counts
//     by AllGather, then the rows (key, slot, vector, optimizer states,
//     packed as 32-bit words) in chunks of at most gatherChunkBytes per
//     rank by AllToAllV to rank 0, which merges them by key;
//   - an embedding that is whole on every rank (replicated) from rank 0.
//
// After each phase the ranks agree (an AllReduce of a failure flag), so a
// rank whose write failed makes every rank's Save fail instead of leaving
// the others waiting in the next gather.
//
// Loading needs no collective: every rank reads the files and keeps the
// rows it owns under the layer's rule (ownsRow: layers.Shard's OwnsKey,
// OwnsSlot).

// gatherChunkBytes bounds the rows one rank sends per AllToAllV round of a
// save.
const gatherChunkBytes = 16 << 20

// gatherChunkRows, when > 0, is the rows per round instead (tests).
var gatherChunkRows = 0

// rankComm is the communicator of the model's group; nil for a model
// alone (or a group of one).
func (m *Model) rankComm() collective.Comm {
	if m.comm == nil || m.comm.Size() < 2 {
		return nil
	}
	return m.comm
}

// leads reports whether this rank writes the model files (rank 0, or a
// model alone).
func (m *Model) leads() bool {
	c := m.rankComm()
	return c == nil || c.Rank() == 0
}

// shardOf is the part of embedding e this rank holds: rank r of world w
// (w == 1: the whole table, on every rank).
func shardOf(e *embedding) (r, w int) {
	s := e.layer.Cfg.Shard
	if !s.Sharded() {
		return 0, 1
	}
	return s.Rank, s.World
}

// ownsRow reports whether rank r of w holds the row of key (in slot,
// Localized kinds) of embedding kind: DistributedSlotSparseEmbeddingHash
// keys by floorMod(key, w), the Localized kinds' rows by slot mod w.
func ownsRow(kind layers.EmbeddingKind, key, slot int64, r, w int) bool {
	s := layers.Shard{Rank: r, World: w}
	if kind == layers.DistributedHash {
		return s.OwnsKey(key)
	}
	return s.OwnsSlot(int(slot))
}

// agree makes the ranks' outcomes of a save phase one: every rank returns
// an error when any rank failed (its own, or one saying another rank
// failed). A model alone returns err.
func (m *Model) agree(err error) error {
	c := m.rankComm()
	if c == nil {
		return err
	}
	be := c.Backend()
	flag := be.Alloc(tensor.Int32, 1)
	defer be.Free(flag)
	if err != nil {
		be.Upload(flag, []int32{1})
	}
	if cerr := c.AllReduce(flag, collective.Max); cerr != nil {
		return errors.Join(err, cerr)
	}
	v := make([]int32, 1)
	if derr := be.Download(v, flag); derr != nil {
		return errors.Join(err, derr)
	}
	if err == nil && v[0] != 0 {
		return fmt.Errorf("rank %d: another rank of the group failed to save the model files", c.Rank())
	}
	return err
}

// sparseRows are an embedding's rows as its model files hold them, in
// ascending key order.
type sparseRows struct {
	vec    int
	keys   []int64
	slots  []int64     // Localized kinds; nil otherwise
	emb    []float32   // [n, vec]
	states [][]float32 // optimizer states, each [n, vec]
}

// localRows collects this rank's rows of e (with the optimizer states when
// withOpt).
func (m *Model) localRows(e *embedding, withOpt bool) (*sparseRows, error) {
	rows, keys, err := m.rowsKeys(e)
	if err != nil {
		return nil, err
	}
	vec := e.g.VecSize
	r := &sparseRows{vec: vec, keys: keys}
	gatherRowsOf := func(t tensor.Tensor) ([]float32, error) {
		v, err := m.download(t)
		if err != nil {
			return nil, err
		}
		out := make([]float32, 0, vec*len(rows))
		for _, row := range rows {
			out = append(out, v[int(row)*vec:int(row)*vec+vec]...)
		}
		return out, nil
	}
	if r.emb, err = gatherRowsOf(e.layer.Table); err != nil {
		return nil, err
	}
	if localized(e) {
		if r.slots, err = m.slotIDs(e, rows, keys); err != nil {
			return nil, err
		}
	}
	if withOpt {
		s1, s2 := e.opt.EmbeddingState(0)
		for _, t := range []tensor.Tensor{s1, s2} {
			if t.IsZero() {
				continue
			}
			v, err := gatherRowsOf(t)
			if err != nil {
				return nil, err
			}
			r.states = append(r.states, v)
		}
	}
	return r, nil
}

// files renders the rows as a sparse directory's files (key, emb_vector,
// slot_id for the Localized kinds) and the optimizer-state file.
func (r *sparseRows) files() (dir map[string][]byte, opt []byte) {
	kb := make([]byte, 0, 8*len(r.keys))
	for _, k := range r.keys {
		kb = binary.LittleEndian.AppendUint64(kb, uint64(k))
	}
	dir = map[string][]byte{"key": kb, "emb_vector": f32bytes(make([]byte, 0, 4*len(r.emb)), r.emb)}
	if r.slots != nil {
		sb := make([]byte, 0, 8*len(r.slots))
		for _, s := range r.slots {
			sb = binary.LittleEndian.AppendUint64(sb, uint64(s))
		}
		dir["slot_id"] = sb
	}
	for _, s := range r.states {
		opt = f32bytes(opt, s)
	}
	return dir, opt
}

// words is the number of 32-bit words of one packed row.
func (r *sparseRows) words(slots bool) int {
	w := 2 + r.vec*(1+len(r.states))
	if slots {
		w += 2
	}
	return w
}

// gatherRows collects every rank's rows on rank 0, merged in ascending key
// order; the other ranks get nil. local's shape (vector width, state
// count, slots) is the same on every rank.
func gatherRows(c collective.Comm, local *sparseRows, slots bool) (*sparseRows, error) {
	be, w, rank := c.Backend(), c.Size(), c.Rank()
	mine := be.Alloc(tensor.Int64, 1)
	counts := be.Alloc(tensor.Int64, w)
	defer be.Free(mine)
	defer be.Free(counts)
	be.Upload(mine, []int64{int64(len(local.keys))})
	if err := c.AllGather(counts, mine); err != nil {
		return nil, err
	}
	n := make([]int64, w)
	if err := be.Download(n, counts); err != nil {
		return nil, err
	}
	var most, total int64
	for _, x := range n {
		most, total = max(most, x), total+x
	}
	words := local.words(slots)
	chunk := int64(max(1, gatherChunkBytes/(4*words)))
	if gatherChunkRows > 0 {
		chunk = int64(gatherChunkRows)
	}
	rounds := (most + chunk - 1) / chunk
	src := be.Alloc(tensor.Int32, int(min(chunk, max(most, 1)))*words)
	defer be.Free(src)
	dstLen := 1
	if rank == 0 {
		dstLen = w * src.Len()
	}
	dst := be.Alloc(tensor.Int32, dstLen)
	defer be.Free(dst)
	sendBuf := make([]int32, src.Len())
	var recvBuf []int32
	var all *sparseRows
	var from []int // source rank of each gathered row
	if rank == 0 {
		recvBuf = make([]int32, dstLen)
		all = &sparseRows{vec: local.vec, keys: make([]int64, 0, total), emb: make([]float32, 0, total*int64(local.vec)),
			states: make([][]float32, len(local.states))}
		if slots {
			all.slots = make([]int64, 0, total)
		}
		for i := range all.states {
			all.states[i] = make([]float32, 0, total*int64(local.vec))
		}
	}
	part := func(count, t int64) int { return int(max(0, min(chunk, count-t*chunk))) }
	vec := local.vec
	for t := range rounds {
		send, recv := make([]int, w), make([]int, w)
		k := part(int64(len(local.keys)), t)
		send[0] = k * words
		for i := range k {
			row := int(t*chunk) + i
			p := sendBuf[i*words : (i+1)*words]
			key := uint64(local.keys[row])
			p[0], p[1] = int32(uint32(key)), int32(uint32(key>>32))
			q := p[2:]
			if slots {
				s := uint64(local.slots[row])
				q[0], q[1] = int32(uint32(s)), int32(uint32(s>>32))
				q = q[2:]
			}
			for j, x := range local.emb[row*vec : row*vec+vec] {
				q[j] = int32(math.Float32bits(x))
			}
			q = q[vec:]
			for _, st := range local.states {
				for j, x := range st[row*vec : row*vec+vec] {
					q[j] = int32(math.Float32bits(x))
				}
				q = q[vec:]
			}
		}
		if rank == 0 {
			for j := range w {
				recv[j] = part(n[j], t) * words
			}
		}
		be.Upload(src, sendBuf)
		if err := c.AllToAllV(dst, recv, src, send); err != nil {
			return nil, err
		}
		if rank != 0 {
			continue
		}
		if err := be.Download(recvBuf, dst); err != nil {
			return nil, err
		}
		off := 0
		for j := range w {
			for range recv[j] / words {
				p := recvBuf[off : off+words]
				off += words
				all.keys = append(all.keys, int64(uint64(uint32(p[0]))|uint64(uint32(p[1]))<<32))
				q := p[2:]
				if slots {
					all.slots = append(all.slots, int64(uint64(uint32(q[0]))|uint64(uint32(q[1]))<<32))
					q = q[2:]
				}
				for _, x := range q[:vec] {
					all.emb = append(all.emb, math.Float32frombits(uint32(x)))
				}
				q = q[vec:]
				for s := range all.states {
					for _, x := range q[:vec] {
						all.states[s] = append(all.states[s], math.Float32frombits(uint32(x)))
					}
					q = q[vec:]
				}
				from = append(from, j)
			}
		}
	}
	if rank != 0 {
		return nil, nil
	}
	return all.sorted(from)
}

// sorted returns r with its rows in ascending key order; from (the rank
// each row came from) names both ranks of a key held twice.
func (r *sparseRows) sorted(from []int) (*sparseRows, error) {
	idx := make([]int, len(r.keys))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return r.keys[idx[a]] < r.keys[idx[b]] })
	vec := r.vec
	out := &sparseRows{vec: vec, keys: make([]int64, len(idx)), emb: make([]float32, len(r.emb)), states: make([][]float32, len(r.states))}
	if r.slots != nil {
		out.slots = make([]int64, len(idx))
	}
	for s := range r.states {
		out.states[s] = make([]float32, len(r.states[s]))
	}
	for i, j := range idx {
		if i > 0 && r.keys[idx[i-1]] == r.keys[j] {
			return nil, fmt.Errorf("key %d is held by ranks %d and %d (each key belongs to one rank)", r.keys[j], from[idx[i-1]], from[j])
		}
		out.keys[i] = r.keys[j]
		if r.slots != nil {
			out.slots[i] = r.slots[j]
		}
		copy(out.emb[i*vec:(i+1)*vec], r.emb[j*vec:(j+1)*vec])
		for s := range r.states {
			copy(out.states[s][i*vec:(i+1)*vec], r.states[s][j*vec:(j+1)*vec])
		}
	}
	return out, nil
}

// oneHotRows is the number of global rows of a OneHot embedding (its keys
// are 0 … oneHotRows−1).
func oneHotRows(e *embedding) int64 {
	var n int64
	for _, sz := range e.layer.Cfg.SlotSizes {
		n += sz
	}
	return n
}

// oneHotRow is the row of this rank's table holding OneHot key k (a key
// this rank owns).
func oneHotRow(e *embedding, k int64) int32 {
	return int32(e.layer.LocalRow(k))
}

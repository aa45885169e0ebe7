package graph

// Shape inference of the sequence and attention layers (docs/LAYERS.md):
// MatrixMultiply, Softmax (1 bottom, or 2 with a mask), GRU,
// MultiHeadAttention, SequenceMask. The batch dimension is not known here;
// the trainer checks the forms that tie a width to it (MatrixMultiply 2-D,
// GRU's batchsize).
func inferSeq(l *DenseLayer, li *LayerInfo) *Error {
	x := li.In[0]
	switch l.Type {
	case MatrixMultiply:
		if err := nIn(l, li, 2, 2); err != nil {
			return err
		}
		y := li.In[1]
		switch {
		case x.Rows != y.Rows:
		case len(x.Dims) == 1 && len(y.Dims) == 1:
			// [B, n]·[n, k], the right operand's rows being its batch (n = B).
			li.Out = []Shape{{Rows: x.Rows, Dims: []int{y.Dims[0]}}}
			return nil
		case len(x.Dims) == 1 && len(y.Dims) == 2:
			// [B, m]·[m, g, h] → [B, g, h] (m = B).
			li.Out = []Shape{{Rows: x.Rows, Dims: []int{y.Dims[0], y.Dims[1]}}}
			return nil
		case len(x.Dims) == 2 && len(y.Dims) == 2 && x.Dims[1] == y.Dims[0]:
			li.Out = []Shape{{Rows: x.Rows, Dims: []int{x.Dims[0], y.Dims[1]}}}
			return nil
		case len(x.Dims) == 3 && len(y.Dims) == 3 && x.Dims[0] == y.Dims[0] && x.Dims[2] == y.Dims[1]:
			li.Out = []Shape{{Rows: x.Rows, Dims: []int{x.Dims[0], x.Dims[1], y.Dims[2]}}}
			return nil
		}
		return bad("MatrixMultiply: want [B, m, n]·[B, n, k], [B, h, m, n]·[B, h, n, k], [B, n]·[n, k] or [B, m]·[m, g, h], have %v and %v", x, y)
	case Softmax:
		if err := nIn(l, li, 1, 2); err != nil {
			return err
		}
		if len(li.In) == 2 {
			m := li.In[1]
			if len(x.Dims) != 3 || len(m.Dims) != 3 || m.Rows != x.Rows || m.Dims[0] != 1 || m.Dims[1] != x.Dims[1] || m.Dims[2] != x.Dims[2] {
				return bad("Softmax with a mask: want scores [B, h, m, n] and mask [B, 1, m, n], have %v and %v", x, m)
			}
		}
		li.Out = []Shape{x}
	case GRU:
		if err := nIn(l, li, 1, 1); err != nil {
			return err
		}
		if l.NumOutput <= 0 || l.SeqLength <= 0 || l.VectorSize <= 0 || l.GRUBatchSize <= 0 {
			return errorf("", "", ErrValue, "gru_param: num_output, batchsize, SeqLength and vector_size must be positive")
		}
		if x.Elems() != l.SeqLength*l.VectorSize {
			return bad("GRU: input %v is not SeqLength·vector_size = %d·%d values a sample", x, l.SeqLength, l.VectorSize)
		}
		h, e := l.NumOutput, l.VectorSize
		// HugeCTR's two weights: cuDNN's weight space (W [3H, E], R [3H, H],
		// input bias [3H]) and hx [batchsize, H].
		li.ParamShapes = [][]int{{3 * h, e}, {3 * h, h}, {3 * h}, {l.GRUBatchSize, h}}
		li.Out = []Shape{flat(l.SeqLength, h)}
	case MultiHeadAttention:
		if err := nIn(l, li, 3, 4); err != nil {
			return err
		}
		k, v := li.In[1], li.In[2]
		hd := l.NumAttentionHeads
		if len(x.Dims) != 2 || len(k.Dims) != 2 || len(v.Dims) != 2 || x.Rows != k.Rows || k.Rows != v.Rows ||
			k.Dims[0] != v.Dims[0] || x.Dims[1] != k.Dims[1] || k.Dims[1] != v.Dims[1] {
			return bad("MultiHeadAttention: want query [B, m, D], key and value [B, t, D], have %v, %v, %v", x, k, v)
		}
		if hd <= 0 || x.Dims[1]%hd != 0 {
			return errorf("", "", ErrValue, "num_attention_heads %d does not divide the hidden size %d", hd, x.Dims[1])
		}
		if len(li.In) == 4 {
			m := li.In[3]
			if len(m.Dims) != 3 || m.Rows != x.Rows || m.Dims[0] != 1 || m.Dims[1] != x.Dims[0] || m.Dims[2] != k.Dims[0] {
				return bad("MultiHeadAttention: want mask [B, 1, %d, %d], have %v", x.Dims[0], k.Dims[0], m)
			}
		}
		li.Out = []Shape{x}
	case SequenceMask:
		if err := nIn(l, li, 2, 2); err != nil {
			return err
		}
		for _, s := range li.In {
			if s.Elems() != 1 || s.Rows != 1 {
				return bad("SequenceMask: want two [B, 1] length tensors, have %v and %v", li.In[0], li.In[1])
			}
		}
		if l.MaxSeqLenFrom <= 0 || l.MaxSeqLenTo <= 0 {
			return errorf("", "", ErrValue, "max_sequence_len_from and max_sequence_len_to must be positive")
		}
		li.Out = []Shape{flat(1, l.MaxSeqLenFrom, l.MaxSeqLenTo)}
	}
	return nil
}

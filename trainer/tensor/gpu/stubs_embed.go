package gpu

import "github.com/ctrkit/ctrkit/trainer/tensor"

// Placeholders for the embed operations until their kernels land; each fails
// with ErrNoDevice naming itself. Delete an entry when implementing it.

func (be *Backend) HashLookup(h tensor.HashTable, keys, rows tensor.Tensor, insert bool) {
	be.fail("HashLookup", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) SlotRows(rows, keys, offsets, slotOffsets, slotSizes tensor.Tensor) {
	be.fail("SlotRows", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) EmbeddingBag(out, table, rows, offsets tensor.Tensor, c tensor.Combiner) {
	be.fail("EmbeddingBag", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) EmbeddingBagGrad(uniqRows, uniqGrad, numUniq, dOut, rows, offsets tensor.Tensor, c tensor.Combiner) {
	be.fail("EmbeddingBagGrad", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) AUC(scores, labels tensor.Tensor) (float64, error) {
	be.fail("AUC", tensor.ErrNoDevice, "not implemented on the GPU yet")
	return 0, be.err
}

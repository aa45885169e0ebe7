package gpu

import "github.com/ctrkit/ctrkit/trainer/tensor"

// Placeholders for the optim operations until their kernels land; each fails
// with ErrNoDevice naming itself. Delete an entry when implementing it.

func (be *Backend) DenseUpdate(p tensor.OptParams, w, g, s1, s2 tensor.Tensor) {
	be.fail("DenseUpdate", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) SparseUpdate(p tensor.OptParams, table, s1, s2, lastStep, uniqRows, uniqGrad, numUniq tensor.Tensor) {
	be.fail("SparseUpdate", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) LazyFlush(p tensor.OptParams, table, s1, s2, lastStep tensor.Tensor) {
	be.fail("LazyFlush", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

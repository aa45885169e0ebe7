package gpu

import "github.com/ctrkit/ctrkit/trainer/tensor"

// Placeholders for the nn operations until their kernels land; each fails
// with ErrNoDevice naming itself. Delete an entry when implementing it.

func (be *Backend) Interaction(out, x0, emb tensor.Tensor) {
	be.fail("Interaction", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) InteractionGrad(dx0, demb, dOut, x0, emb tensor.Tensor) {
	be.fail("InteractionGrad", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) FmOrder2(out, in tensor.Tensor) {
	be.fail("FmOrder2", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) FmOrder2Grad(din, dOut, in tensor.Tensor) {
	be.fail("FmOrder2Grad", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) BatchNorm(p tensor.BNParams, training bool, y, x, gamma, beta, runMean, runVar, saveMean, saveInvStd tensor.Tensor) {
	be.fail("BatchNorm", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) BatchNormGrad(dx, dgamma, dbeta, dy, x, gamma, saveMean, saveInvStd tensor.Tensor) {
	be.fail("BatchNormGrad", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) Softmax(y, x tensor.Tensor) {
	be.fail("Softmax", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) SoftmaxGrad(dx, dy, y tensor.Tensor) {
	be.fail("SoftmaxGrad", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) BCE(loss, dx, x, y, w tensor.Tensor, gradScale float64) {
	be.fail("BCE", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) SoftmaxCE(loss, dx, x, labels tensor.Tensor, gradScale float64) {
	be.fail("SoftmaxCE", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

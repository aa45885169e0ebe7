package gpu

import "github.com/ctrkit/ctrkit/trainer/tensor"

// Placeholders for the dense operations until their kernels land; each fails
// with ErrNoDevice naming itself. Delete an entry when implementing it.

func (be *Backend) AddBias(y, bias tensor.Tensor) {
	be.fail("AddBias", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) ColSum(dst tensor.Tensor, beta float64, x tensor.Tensor) {
	be.fail("ColSum", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) BiasAct(a tensor.Activation, alpha float64, y, x, bias tensor.Tensor) {
	be.fail("BiasAct", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) Act(a tensor.Activation, alpha float64, y, x tensor.Tensor) {
	be.fail("Act", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) ActGrad(a tensor.Activation, alpha float64, dx, dy, x, y tensor.Tensor) {
	be.fail("ActGrad", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) Axpby(dst tensor.Tensor, a float64, x tensor.Tensor, b float64, y tensor.Tensor) {
	be.fail("Axpby", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) Mul(dst tensor.Tensor, beta float64, x, y tensor.Tensor) {
	be.fail("Mul", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) RowScale(dst tensor.Tensor, beta float64, x, s tensor.Tensor) {
	be.fail("RowScale", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) RowDot(dst, x, y tensor.Tensor) {
	be.fail("RowDot", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) CopyCols(dst tensor.Tensor, dstCol int, src tensor.Tensor, srcCol, width int, beta float64) {
	be.fail("CopyCols", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) Reduce(dst, src tensor.Tensor, outer, n, inner int, scale float64) {
	be.fail("Reduce", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) Broadcast(dst tensor.Tensor, beta float64, src tensor.Tensor, outer, n, inner int, scale float64) {
	be.fail("Broadcast", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) SumSquares(out tensor.Tensor, x tensor.Tensor, scale float64) {
	be.fail("SumSquares", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) SumAbs(out tensor.Tensor, x tensor.Tensor, scale float64) {
	be.fail("SumAbs", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) SignAxpy(dst tensor.Tensor, a float64, x tensor.Tensor) {
	be.fail("SignAxpy", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) Dropout(y, x tensor.Tensor, rate float64, seed, counter uint64) {
	be.fail("Dropout", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

func (be *Backend) DropoutGrad(dx, dy tensor.Tensor, rate float64, seed, counter uint64) {
	be.fail("DropoutGrad", tensor.ErrNoDevice, "not implemented on the GPU yet")
}

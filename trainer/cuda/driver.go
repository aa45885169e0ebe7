package cuda

import (
	"fmt"
	"unsafe"
)

// driverAPI holds the addresses of the driver entry points ctrkit uses.
type driverAPI struct {
	cuInit, cuGetErrorName, cuDriverGetVersion                              uintptr
	cuDeviceGetCount, cuDeviceGet, cuDeviceGetName, cuDeviceGetAttribute    uintptr
	cuDeviceTotalMem, cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRelease   uintptr
	cuCtxSetCurrent, cuCtxSynchronize, cuMemGetInfo                         uintptr
	cuMemAlloc, cuMemFree, cuMemHostAlloc, cuMemFreeHost                    uintptr
	cuMemcpyHtoDAsync, cuMemcpyDtoHAsync, cuMemcpyDtoDAsync                 uintptr
	cuMemsetD32Async, cuMemsetD8Async, cuMemsetD16Async                     uintptr
	cuStreamCreate, cuStreamDestroy, cuStreamSynchronize, cuStreamWaitEvent uintptr
	cuEventCreate, cuEventDestroy, cuEventRecord, cuEventSynchronize        uintptr
	cuEventElapsedTime, cuEventQuery                                        uintptr
	cuModuleLoadData, cuModuleUnload, cuModuleGetFunction, cuLaunchKernel   uintptr
	cuFuncSetAttribute                                                      uintptr
	cuStreamBeginCapture, cuStreamEndCapture, cuGraphInstantiate            uintptr
	cuGraphLaunch, cuGraphExecDestroy, cuGraphDestroy                       uintptr
}

func (d *driverAPI) bind(l *library) error {
	return l.bind(map[*uintptr][]string{
		&d.cuInit:                    {"cuInit"},
		&d.cuGetErrorName:            {"cuGetErrorName"},
		&d.cuDriverGetVersion:        {"cuDriverGetVersion"},
		&d.cuDeviceGetCount:          {"cuDeviceGetCount"},
		&d.cuDeviceGet:               {"cuDeviceGet"},
		&d.cuDeviceGetName:           {"cuDeviceGetName"},
		&d.cuDeviceGetAttribute:      {"cuDeviceGetAttribute"},
		&d.cuDeviceTotalMem:          {"cuDeviceTotalMem_v2"},
		&d.cuDevicePrimaryCtxRetain:  {"cuDevicePrimaryCtxRetain"},
		&d.cuDevicePrimaryCtxRelease: {"cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"},
		&d.cuCtxSetCurrent:           {"cuCtxSetCurrent"},
		&d.cuCtxSynchronize:          {"cuCtxSynchronize"},
		&d.cuMemGetInfo:              {"cuMemGetInfo_v2"},
		&d.cuMemAlloc:                {"cuMemAlloc_v2"},
		&d.cuMemFree:                 {"cuMemFree_v2"},
		&d.cuMemHostAlloc:            {"cuMemHostAlloc"},
		&d.cuMemFreeHost:             {"cuMemFreeHost"},
		&d.cuMemcpyHtoDAsync:         {"cuMemcpyHtoDAsync_v2"},
		&d.cuMemcpyDtoHAsync:         {"cuMemcpyDtoHAsync_v2"},
		&d.cuMemcpyDtoDAsync:         {"cuMemcpyDtoDAsync_v2"},
		&d.cuMemsetD32Async:          {"cuMemsetD32Async"},
		&d.cuMemsetD8Async:           {"cuMemsetD8Async"},
		&d.cuMemsetD16Async:          {"cuMemsetD16Async"},
		&d.cuStreamCreate:            {"cuStreamCreate"},
		&d.cuStreamDestroy:           {"cuStreamDestroy_v2", "cuStreamDestroy"},
		&d.cuStreamSynchronize:       {"cuStreamSynchronize"},
		&d.cuStreamWaitEvent:         {"cuStreamWaitEvent"},
		&d.cuEventCreate:             {"cuEventCreate"},
		&d.cuEventDestroy:            {"cuEventDestroy_v2", "cuEventDestroy"},
		&d.cuEventRecord:             {"cuEventRecord"},
		&d.cuEventSynchronize:        {"cuEventSynchronize"},
		&d.cuEventElapsedTime:        {"cuEventElapsedTime_v2", "cuEventElapsedTime"},
		&d.cuEventQuery:              {"cuEventQuery"},
		&d.cuModuleLoadData:          {"cuModuleLoadData"},
		&d.cuModuleUnload:            {"cuModuleUnload"},
		&d.cuModuleGetFunction:       {"cuModuleGetFunction"},
		&d.cuLaunchKernel:            {"cuLaunchKernel"},
		&d.cuFuncSetAttribute:        {"cuFuncSetAttribute"},
		&d.cuStreamBeginCapture:      {"cuStreamBeginCapture_v2", "cuStreamBeginCapture"},
		&d.cuStreamEndCapture:        {"cuStreamEndCapture"},
		&d.cuGraphInstantiate:        {"cuGraphInstantiateWithFlags"},
		&d.cuGraphLaunch:             {"cuGraphLaunch"},
		&d.cuGraphExecDestroy:        {"cuGraphExecDestroy"},
		&d.cuGraphDestroy:            {"cuGraphDestroy"},
	})
}

// errName is cuGetErrorName of r.
func (d *driverAPI) errName(r int) string {
	var p uintptr
	if d.cuGetErrorName == 0 || call(d.cuGetErrorName, uintptr(r), uintptr(unsafe.Pointer(&p))) != 0 {
		return fmt.Sprintf("CUresult(%d)", r)
	}
	return gostr(p)
}

// check turns a CUresult into an *Error naming the call.
func check(callName string, r int) error {
	if r == 0 {
		return nil
	}
	return &Error{Call: callName, Code: r, Name: drv.errName(r)}
}

// Ptr is a device address (CUdeviceptr).
type Ptr uintptr

// Add offsets p by n bytes.
func (p Ptr) Add(n int) Ptr { return p + Ptr(n) }

// Stream is a CUstream; the zero Stream is the legacy default stream.
type Stream uintptr

// Event is a CUevent.
type Event uintptr

// Func is a kernel (CUfunction).
type Func uintptr

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z int }

// D1 is the 1-D shape (n, 1, 1).
func D1(n int) Dim3 { return Dim3{n, 1, 1} }

// Device attributes (CUdevice_attribute).
const (
	attrMaxThreadsPerBlock    = 1
	attrMaxSharedPerBlock     = 8
	attrMultiprocessorCount   = 16
	attrComputeCapabilityMajr = 75
	attrComputeCapabilityMinr = 76
	attrMaxSharedOptin        = 97
)

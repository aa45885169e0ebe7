package cuda

import (
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// NCCL, like the CUDA libraries, is opened with dlopen (libnccl.so.2,
// CTRKIT_LIBNCCL overrides the path). Only entry points that take
// pointers and integers are bound: ncclCommInitRank takes the 128-byte
// ncclUniqueId by value, which a purego call cannot pass on amd64, so a
// communicator is made with ncclCommInitRankScalable (NCCL ≥ 2.23), which
// takes a pointer to the ids.

type ncclAPI struct {
	getVersion, getUniqueID, commInitRankScalable, commDestroy, commAbort uintptr
	getErrorString, getLastError, commGetAsyncError                       uintptr
	allReduce, reduceScatter, allGather, broadcast, send, recv            uintptr
	groupStart, groupEnd                                                  uintptr
}

var (
	ncclOnce sync.Once
	ncclErr  error
	nccl     ncclAPI
	ncclVer  int
)

func loadNCCL() error {
	ncclOnce.Do(func() {
		// NVLink multicast (NVLS) stays off: ctrkit never asks for it, and
		// NCCL would otherwise pick it on NVSwitch systems by itself.
		if os.Getenv("NCCL_NVLS_ENABLE") == "" {
			os.Setenv("NCCL_NVLS_ENABLE", "0")
		}
		l, err := load("CTRKIT_LIBNCCL", "libnccl.so.2", "libnccl.so")
		if err != nil {
			ncclErr = fmt.Errorf("NCCL: libnccl: %v (install NCCL ≥ 2.23 or set CTRKIT_LIBNCCL)", err)
			return
		}
		err = l.bind(map[*uintptr][]string{
			&nccl.getVersion:        {"ncclGetVersion"},
			&nccl.getUniqueID:       {"ncclGetUniqueId"},
			&nccl.commDestroy:       {"ncclCommDestroy"},
			&nccl.commAbort:         {"ncclCommAbort"},
			&nccl.getErrorString:    {"ncclGetErrorString"},
			&nccl.commGetAsyncError: {"ncclCommGetAsyncError"},
			&nccl.allReduce:         {"ncclAllReduce"},
			&nccl.reduceScatter:     {"ncclReduceScatter"},
			&nccl.allGather:         {"ncclAllGather"},
			&nccl.broadcast:         {"ncclBroadcast"},
			&nccl.send:              {"ncclSend"},
			&nccl.recv:              {"ncclRecv"},
			&nccl.groupStart:        {"ncclGroupStart"},
			&nccl.groupEnd:          {"ncclGroupEnd"},
		})
		if err != nil {
			ncclErr = fmt.Errorf("NCCL: %v", err)
			return
		}
		var v int32
		if r := call(nccl.getVersion, uintptr(unsafe.Pointer(&v))); r != 0 {
			ncclErr = fmt.Errorf("NCCL: ncclGetVersion: %s", ncclString(r))
			return
		}
		ncclVer = int(v)
		p, err := l.sym("ncclCommInitRankScalable")
		if err != nil {
			ncclErr = fmt.Errorf("NCCL %s has no ncclCommInitRankScalable (NCCL ≥ 2.23 is needed)", versionString(ncclVer))
			return
		}
		nccl.commInitRankScalable = p
		if p, err := l.sym("ncclGetLastError"); err == nil {
			nccl.getLastError = p
		}
	})
	return ncclErr
}

// versionString renders NCCL_VERSION_CODE (X·10000 + Y·100 + Z since 2.9).
func versionString(v int) string {
	if v >= 10000 {
		return fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
	}
	return fmt.Sprintf("%d.%d.%d", v/1000, v/100%10, v%100)
}

// NCCLVersion loads NCCL and returns its version ("2.28.3").
func NCCLVersion() (string, error) {
	if err := loadNCCL(); err != nil {
		return "", err
	}
	return versionString(ncclVer), nil
}

// NCCLUniqueID is ncclUniqueId: the 128 bytes rank 0 makes and every rank
// passes to NCCLCommInit.
type NCCLUniqueID [128]byte

// NCCLGetUniqueID makes a new id (on rank 0, before any rank initializes).
func NCCLGetUniqueID() (NCCLUniqueID, error) {
	var id NCCLUniqueID
	if err := loadNCCL(); err != nil {
		return id, err
	}
	return id, ncclCheck("ncclGetUniqueId", call(nccl.getUniqueID, uintptr(unsafe.Pointer(&id[0]))), 0)
}

// NCCLComm is an ncclComm_t.
type NCCLComm uintptr

// NCCLType is ncclDataType_t.
type NCCLType int

// The NCCL data types ctrkit uses.
const (
	NCCLInt32   NCCLType = 2
	NCCLUint32  NCCLType = 3
	NCCLInt64   NCCLType = 4
	NCCLFloat16 NCCLType = 6
	NCCLFloat32 NCCLType = 7
	NCCLFloat64 NCCLType = 8
	NCCLBF16    NCCLType = 9
)

// NCCLOp is ncclRedOp_t.
type NCCLOp int

// The built-in reductions.
const (
	NCCLSum  NCCLOp = 0
	NCCLProd NCCLOp = 1
	NCCLMax  NCCLOp = 2
	NCCLMin  NCCLOp = 3
	NCCLAvg  NCCLOp = 4
)

// NCCLError is a failed NCCL call.
type NCCLError struct {
	Call   string
	Code   int
	Detail string // ncclGetLastError's text, when there is one
}

func (e *NCCLError) Error() string {
	s := fmt.Sprintf("NCCL: %s: %s", e.Call, ncclString(e.Code))
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

func ncclString(r int) string {
	if nccl.getErrorString != 0 {
		if p, _, _ := purego.SyscallN(nccl.getErrorString, uintptr(r)); p != 0 {
			return fmt.Sprintf("%s (%d)", gostr(p), r)
		}
	}
	return fmt.Sprintf("ncclResult %d", r)
}

func ncclCheck(name string, r int, comm NCCLComm) error {
	if r == 0 {
		return nil
	}
	e := &NCCLError{Call: name, Code: r}
	if nccl.getLastError != 0 {
		if p, _, _ := purego.SyscallN(nccl.getLastError, uintptr(comm)); p != 0 {
			e.Detail = gostr(p)
		}
	}
	return e
}

// NCCLCommInit joins rank of an nranks communicator identified by id. It
// blocks until every rank has joined, so ranks driven by one process must
// call it from their own device goroutines at the same time. It runs on
// the device goroutine (the device's context is current).
func (c *Ctx) NCCLCommInit(nranks, rank int, id *NCCLUniqueID) (NCCLComm, error) {
	if err := loadNCCL(); err != nil {
		return 0, err
	}
	var comm NCCLComm
	r := call(nccl.commInitRankScalable, uintptr(unsafe.Pointer(&comm)), uintptr(nranks), uintptr(rank), 1, uintptr(unsafe.Pointer(&id[0])), 0)
	return comm, ncclCheck("ncclCommInitRankScalable", r, 0)
}

// NCCLCommDestroy frees the communicator; with abort it first aborts
// operations still running (after an error).
func (c *Ctx) NCCLCommDestroy(comm NCCLComm, abort bool) error {
	if abort {
		return ncclCheck("ncclCommAbort", call(nccl.commAbort, uintptr(comm)), 0)
	}
	return ncclCheck("ncclCommDestroy", call(nccl.commDestroy, uintptr(comm)), 0)
}

// NCCLAsyncError reports an asynchronous failure of the communicator (a
// peer that died, a network error).
func (c *Ctx) NCCLAsyncError(comm NCCLComm) error {
	var r int32
	if e := call(nccl.commGetAsyncError, uintptr(comm), uintptr(unsafe.Pointer(&r))); e != 0 {
		return ncclCheck("ncclCommGetAsyncError", e, comm)
	}
	return ncclCheck("asynchronous error", int(r), comm)
}

// NCCLAllReduce enqueues recv = op over ranks of send (count elements; in
// place when send == recv) on stream s.
func (c *Ctx) NCCLAllReduce(send, recv Ptr, count int, dt NCCLType, op NCCLOp, comm NCCLComm, s Stream) error {
	return ncclCheck("ncclAllReduce", call(nccl.allReduce, uintptr(send), uintptr(recv), uintptr(count), uintptr(dt), uintptr(op), uintptr(comm), uintptr(s)), comm)
}

// NCCLReduceScatter enqueues recv (recvCount elements) = block rank of
// op over ranks of send (nranks·recvCount elements).
func (c *Ctx) NCCLReduceScatter(send, recv Ptr, recvCount int, dt NCCLType, op NCCLOp, comm NCCLComm, s Stream) error {
	return ncclCheck("ncclReduceScatter", call(nccl.reduceScatter, uintptr(send), uintptr(recv), uintptr(recvCount), uintptr(dt), uintptr(op), uintptr(comm), uintptr(s)), comm)
}

// NCCLAllGather enqueues recv[i·sendCount:] = rank i's send.
func (c *Ctx) NCCLAllGather(send, recv Ptr, sendCount int, dt NCCLType, comm NCCLComm, s Stream) error {
	return ncclCheck("ncclAllGather", call(nccl.allGather, uintptr(send), uintptr(recv), uintptr(sendCount), uintptr(dt), uintptr(comm), uintptr(s)), comm)
}

// NCCLBroadcast enqueues recv = root's send on every rank.
func (c *Ctx) NCCLBroadcast(send, recv Ptr, count int, dt NCCLType, root int, comm NCCLComm, s Stream) error {
	return ncclCheck("ncclBroadcast", call(nccl.broadcast, uintptr(send), uintptr(recv), uintptr(count), uintptr(dt), uintptr(root), uintptr(comm), uintptr(s)), comm)
}

// NCCLSend enqueues a point-to-point send of count elements to peer (in a
// group with the matching NCCLRecv calls).
func (c *Ctx) NCCLSend(send Ptr, count int, dt NCCLType, peer int, comm NCCLComm, s Stream) error {
	return ncclCheck("ncclSend", call(nccl.send, uintptr(send), uintptr(count), uintptr(dt), uintptr(peer), uintptr(comm), uintptr(s)), comm)
}

// NCCLRecv enqueues a point-to-point receive of count elements from peer.
func (c *Ctx) NCCLRecv(recv Ptr, count int, dt NCCLType, peer int, comm NCCLComm, s Stream) error {
	return ncclCheck("ncclRecv", call(nccl.recv, uintptr(recv), uintptr(count), uintptr(dt), uintptr(peer), uintptr(comm), uintptr(s)), comm)
}

// NCCLGroupStart opens a group of NCCL calls issued as one.
func (c *Ctx) NCCLGroupStart() error {
	return ncclCheck("ncclGroupStart", call(nccl.groupStart), 0)
}

// NCCLGroupEnd issues the group's calls.
func (c *Ctx) NCCLGroupEnd() error {
	return ncclCheck("ncclGroupEnd", call(nccl.groupEnd), 0)
}

// Package collective provides the communication between the ranks of a
// multi-GPU or multi-node training run: all-reduce, reduce-scatter,
// all-gather, all-to-all(v) and broadcast over tensors of each rank's
// backend, behind one interface (Comm) with two implementations:
//
//   - NCCL (NewNCCL, NewNCCLGroup): libnccl.so.2 through purego, the
//     collectives enqueued on each GPU backend's stream; one process can
//     drive several GPUs (one rank per device goroutine) and several
//     processes join over the rendezvous below.
//   - host (NewLocalGroup, Group.HostComms): the data staged through host
//     memory and exchanged between goroutines (ranks of one process) or
//     over TCP (ranks of other processes). It works with any backend and is
//     deterministic: every reduction adds the ranks' values in rank order,
//     so every rank gets bit-identical results and a run is reproducible.
//     CI tests every sharding path with it on the CPU.
//
// Beside the communicators, a Group's Gatherer all-gathers byte strings of
// any length on a stream of its own over the same connections, whatever
// the communicators are (ctrkit train --data-shard exchanges the ranks'
// parts of each batch with it, from the readers' goroutines).
//
// # Launch and rendezvous
//
// A multi-process run is started by an existing launcher (mpirun, srun,
// torchrun or anything setting CTRKIT_RANK / CTRKIT_WORLD_SIZE /
// CTRKIT_MASTER_ADDR); FromEnv reads its variables. Join connects the
// processes: process 0 listens on the master address; every other process
// listens on an ephemeral port of the interface that reaches the master,
// connects to the master and says hello; the master answers each with the
// table of all processes (their rank counts and addresses) and a payload
// of its own (the NCCL unique id); then every process connects to each
// process of lower index above 0, so each pair shares one TCP connection.
// Every step has a deadline (Options.Timeout); an error names the address
// that could not be reached and the variable it came from.
//
// # Wire format
//
// Control messages and the host implementation's data share one framing,
// little-endian:
//
//	off size field
//	0   4    magic 0x4b525443 ("CTRK")
//	4   4    sequence number of the collective on the sending rank
//	8   4    source rank (global)
//	12  4    destination rank (global)
//	16  1    operation (OpAllReduce ...)
//	17  1    element type (tensor.DType)
//	18  2    reserved, zero
//	20  4    stream: 0 for the communicators' collectives, else a
//	         Gatherer's (AllGatherBytes of data parts, queued apart)
//	24  8    payload length in bytes
//	32  ...  payload
//
// A receiver checks every field against what it expects, so ranks that
// call different collectives (or the same one with other sizes) get an
// error naming both calls instead of a hang or garbage.
package collective

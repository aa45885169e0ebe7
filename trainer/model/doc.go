// Package model trains, evaluates and serves a HugeCTR model on a
// tensor.Backend: Build turns a graph.Config (read from HugeCTR's JSON or
// built by graph.Reference) into an executable network of trainer/layers,
// with one optimizer for the dense network and one per embedding; Fit,
// Evaluate and Predict run it over formats.Reader batches; Save and Load use
// HugeCTR's model files (SPEC §7).
//
// # Batches
//
// The network is built for one batch size B. Package trainer/input turns a
// reader batch into the network's inputs (labels [B, L], dense [B, D], and
// per sparse input CSR keys int64 and offsets int32 over its slots, which
// are consecutive slots of the file: WDL's wide input is slot 0, its deep
// input slots 1…26): uploaded as read, split by input on the backend, one
// pipeline per Fit for training and one for evaluation. A short batch (the end of an epoch) is padded with
// empty samples: Evaluate and Predict drop the padding's outputs; Fit skips a
// short training batch (its gradient would include the padding).
//
// # Several ranks
//
// A Model built with Options.Parallel is one rank of a group that trains
// one model (docs/MULTI_GPU.md): its dense network runs the rank's block
// of B/W samples of every global batch, its embeddings hold the rank's
// rows (EmbeddingConfig.Shard) and pool them for the whole batch, and the
// step exchanges pooled rows and gradients over the rank's
// collective.Comm (parallel.go). NewGroup builds a group's models and
// Group (FitGroup) runs them, one goroutine a rank; every rank trains the
// numbers one rank would.
//
// # Model files (SPEC §7)
//
//	<prefix>_dense_<iter>.model        float32 weights of every layer in graph order
//	                                   (InnerProduct W [in, out] then b [out];
//	                                   BatchNorm γ then β;
//	                                   MultiCross per layer w [d] then b [d])
//	<prefix>_dense_<iter>.model.ntp.json  BatchNorm running mean and var, JSON,
//	                                   one {"type","mean","var"} per BatchNorm layer
//	                                   (only when the model has BatchNorm)
//	<prefix>_opt_dense_<iter>.model    float32 optimizer state, first state of every
//	                                   weight then the second (Adam m‖v; SGD: empty)
//	<prefix><i>_sparse_<iter>.model/   key        int64 [n]
//	                                   emb_vector float32 [n, vec]
//	                                   slot_id    uint64 [n] (Localized embeddings)
//	<prefix><i>_opt_sparse_<iter>.model float32 per-row state, first state of every
//	                                   row then the second, rows in key-file order
//
// Rows are written in ascending key order, whatever order the keys were
// first seen in and however many ranks held the table: the files of one
// model are byte-identical whatever the rank count (HugeCTR's loader takes
// rows in any order). In a group of ranks (Options.Parallel) every rank
// calls Save; rank 0 gathers the sharded rows and writes; every rank loads
// the rows it owns (parallel_files.go, docs/MULTI_GPU.md).
// slot_id is the slot a row was inserted from: for a LocalizedSlotSparse-
// EmbeddingHash the layer records it when training inserts the key (the
// smallest slot the key occurs in within that batch, on every backend), so
// no slot_size_array is needed; for the OneHot kind it is the slot whose key
// range holds the row. Loading a slot_id file restores the record.
// Model.CheckSave, called by Fit and Train before the first step, refuses a
// prefix whose directory cannot be created or written.
// Every file is written under a temporary name, synced and renamed; a
// sparse directory is assembled under a temporary name and renamed into
// place. Save adds <prefix>_snapshot_<iter>.json, a manifest of every file
// with size and CRC-32C written last, so a snapshot is one committed unit;
// LoadSnapshot refuses an incomplete or mismatched set by file name, loads
// HugeCTR's files (no manifest) with a note, and continues the iteration
// count from the snapshot's (docs/MODEL_FILES.md).
//
// A Model is not safe for concurrent use.
package model

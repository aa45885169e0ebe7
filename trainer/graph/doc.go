// Package graph is the description of a HugeCTR model: its input, sparse
// embeddings and dense layers (Graph), and the solver, data-reader and
// optimizer settings of HugeCTR's full JSON configs (Config). It reads every
// JSON form HugeCTR has used for a model and writes the graph JSON that
// HugeCTR's Model.graph_to_json writes, byte for byte.
//
// # Files read
//
//	graph JSON (graph_to_json, v3.1+)   {"layers": [Data, embeddings…, dense layers…], "model_name"?}
//	JSON config (v3.1+, test/scripts)   {"solver", "optimizer", "layers"}; layers carry "name",
//	                                     Data carries "format", "source", "check", …
//	JSON config (≤ v3.0)                 as above, with sparse "max_feature_num_per_sample",
//	                                     embedding "max_vocabulary_size_per_gpu", integer combiner
//	inference config                     {"inference", "layers"}
//
// The reader accepts all of them (HUGECTR_GRAPH.md §6): bottom/top as a string
// or an array; nnz_per_slot as a scalar or an array; is_fixed_length as a bool
// or 0/1; combiner "sum"/"mean" or 0/1; PReLU_Dice "alpha" or "elu_alpha";
// MultiCross "projection_dim"; ReduceSum/ReduceMean without "axis" (axis 1);
// MultiCrossEntropyLoss without "target_weight"; legacy layer names Multiply
// (WeightMultiply) and DotProduct (ElementwiseMultiply). Every key HugeCTR's
// parsers define is read; a key the reader never looks up (a misspelling
// such as "learning_rat") is an error with the nearest known key, where
// HugeCTR would drop it silently. Keys that only tune HugeCTR's scheduling
// (enable_overlap, holistic_cuda_graph, device_layout, all_reduce,
// async_param.io_block_size, num_iterations_statistics) are checked and
// accepted: they do not change what is computed. cuda_graph (default true)
// is Solver.CUDAGraph: the GPU trains each step as a CUDA graph, computing
// what the eager step does; algorithm_search (default true) is
// Solver.NoAlgorithmSearch's opposite: the GPU times cuBLASLt's candidate
// algorithms per GEMM shape once. Errors are *Error values naming the file and the JSON
// path (layers[3].fc_param.num_output) and unwrapping to a sentinel; a JSON
// syntax error names its line and column.
//
// # File written
//
// WriteJSON writes what HugeCTR v23.09's save_graph_to_json writes: one object
// with "layers" (Data, then embeddings, then dense layers) and "model_name"
// when set; every object's keys sorted byte-wise (nlohmann::json's std::map);
// two-space indentation, one member or element per line, "key": value, no
// trailing newline; float32 parameters widened to double and printed the way
// nlohmann/json 3.9 prints doubles ("1.0", "0.8999999761581421",
// "1.0000000116860974e-07"). Where HugeCTR's writer and reader disagree
// (HUGECTR_GRAPH.md §1.7) ctrkit writes what reads back: MultiCross
// "projection_dim" when non-zero, PReLU_Dice both "alpha" and "elu_alpha",
// MultiCrossEntropyLoss "target_weight" always (ones when none was given).
//
// Shapes: Infer computes every tensor's per-sample shape and each layer's
// trainable parameter count; the dense model file (SPEC §7) is the
// concatenation of the layers' parameters in Graph.Layers order.
package graph

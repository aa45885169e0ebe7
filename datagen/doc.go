// Package datagen generates synthetic CTR datasets: everything HugeCTR's
// DataGenerator does (SPEC §5), reproducibly, in parallel, and with labels a
// model can learn.
//
// # Keys
//
// Slot s draws its keys from a range of size_s = SlotSizeArray[s] keys:
// Norm from the global range [P_s, P_s + size_s − 1], P_s = Σ_{j<s} size_j;
// Parquet, Raw and Criteo from the slot-local range [0, size_s − 1]. With the
// power law (the default) key lo + round(y) − 1 is drawn by the inverse CDF
// y = ((M^(1−α) − 1)·x + 1)^(1/(1−α)), x ~ U[0,1), M = size_s, so the
// smallest keys are the hottest (PowerLaw, PowerLawKey; Long/Medium/Short
// are α 0.9/1.1/1.3, Specific uses Params.Alpha). Uniform draws every key of
// the range with the same probability (Uniform).
//
// Keys per slot and sample: Norm exactly nnz_array[s]; Parquet
// 1 + rand % nnz_array[s] (a list column when nnz_array[s] > 1); Raw
// nnz_array[s] (the multi-hot layout when some entry is above 1); Criteo
// one (a missing categorical at MissingRate).
//
// # Labels and dense values
//
// LabelMode UniformLabels reproduces HugeCTR's values: Norm and Parquet
// labels and dense values uniform floats in [0, 1); Raw label = i mod 2 (i
// the sample's index in its file) and dense column j = j (int32 j, which
// reads as ln(j+1), or float32 j with FloatLabelDense); Criteo labels 0/1
// with probability ½ and dense values as in the planted mode.
//
// LabelMode Planted (the default) draws each label column j as an
// independent Bernoulli(P_j) with P_j the probability of a hidden logistic
// model of its own (seeded by j; a multi-task model has one planted task a
// column):
//
//	logit = bias + Σ_slots Σ_keys w(slot, key) + Σ_j v_j·(u_j − ½)·√12
//
// w(slot, key) = σ·N(slot, key) is a weight per slot-local key (hot keys
// included) derived by hashing (model seed, slot, key) to an approximately
// standard normal number, so no table grows with the vocabulary; σ =
// KeyLogitStd/√(Σ nnz). v_j ~ DenseLogitStd/√D·N(j). u_j ∈ [0, 1) is dense
// value j normalized: the value itself for float dense (Norm, Parquet, Raw
// with FloatLabelDense: uniform in [0, 1)), and ln(x+1)/ln(4096) for integer
// dense values x (Raw int32, Criteo), drawn log-uniformly in [0, 4095]. A
// missing Criteo value contributes 0. The bias is fitted so the mean P is
// TargetCTR (0.25) on 8192 calibration samples. The generator reports the
// Bayes AUC it planted: the exact AUC (Mann–Whitney, ties ½) of the true
// P against the drawn labels of column 0 of the eval samples (the first 2^25
// of them), about 0.83 with the default settings, and that of every column
// when label_dim > 1 (Result.PlantedAUCs, gen_params.json planted_aucs); a
// logistic regression on one-hot keys and dense values approaches it as
// data grows.
//
// # Files
//
// See Params.Plan for the names. Norm, Parquet and Criteo write file lists
// at Source and EvalSource (paths relative to the list), Parquet writes
// _metadata.json beside the train files and beside the eval files, and
// every run writes gen_params.json (all parameters, the seed and the
// planted AUC) in the directory of Source. Every file is written under a
// temporary name and renamed when complete.
//
// # Reproducibility and parallelism
//
// Sample i of a file is generated from the random stream of its chunk
// (i / ChunkSamples), seeded by SplitMix64 mixing of (master seed, train or
// eval, file index, chunk index) into a PCG generator; the planted model
// has a seed of its own. So the same seed gives byte-identical files
// whatever Params.Threads. Files are written by an errgroup limited to
// Threads; when there are fewer than 2·Threads files (Raw has two), files
// are written one at a time with Threads goroutines generating chunks and
// one writing them in order.
//
// # Criteo text
//
// The fourth output format is Criteo-style text for converter tests: per
// line a 0/1 label, DenseDim decimal integers and NumSlot categoricals of 8
// hex digits (CriteoHash of the slot-local key), tab-separated, with empty
// fields for missing values at MissingRate.
package datagen

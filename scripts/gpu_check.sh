#!/bin/sh
# The GPU machine's whole check-and-measure, run from the folder that
# `make gpu` fills (.gpu/): parity tests, GPU training tests, the quickstart,
# the DLRM throughput bench against PyTorch, the planted-AUC run. Logs go to
# $OUT (or /tmp/ctrkit-gpu); a short table is printed last.
#   sh .gpu/gpu_check.sh [tests|parity|model] [collectives] [quickstart] [dlrm] [pipeline] [profile] [algsearch] [python] [conformance] [planted] [readers] [convert]
# (default: tests quickstart dlrm planted)
G=$(cd "$(dirname "$0")" && pwd)
# The repository copy the folder sits in: test binaries run from their
# package directory there, where their testdata/ is.
R=$(cd "$G/.." && pwd)
pkgdir() { if [ -d "$R/$1" ]; then echo "$R/$1"; else echo "$G"; fi; }
for f in "$G"/*.gz; do [ -f "$f" ] && gunzip -f "$f"; done
chmod +x "$G"/ctrkit "$G"/*.test 2>/dev/null
OUT=${OUT:-/tmp/ctrkit-gpu}
W=${WORK:-/tmp/ctrkit-work}
mkdir -p "$OUT" "$W"
export CTRKIT_REQUIRE_GPU=1 CTRKIT_KERNEL_CACHE="$W/kernels"
[ -d "$G/hugectr-json" ] && export CTRKIT_HUGECTR_JSON="$G/hugectr-json"
stages=${*:-tests quickstart dlrm planted}
summary="$OUT/summary.txt"
: >"$summary"
row() { printf '%-34s %s\n' "$1" "$2" | tee -a "$summary"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$OUT/gpu.txt" 2>&1
row "gpu" "$(cat "$OUT/gpu.txt")"

for s in $stages; do case $s in
tests|parity|model)
	if [ $s != model ]; then
	"$G/cuda.test" -test.v -test.count=1 >"$OUT/cuda_test.log" 2>&1
	row "cuda binding tests (trainer/cuda)" "rc=$? pass=$(grep -c -- '--- PASS' "$OUT/cuda_test.log") fail=$(grep -c -- '--- FAIL' "$OUT/cuda_test.log")"
	( cd "$(pkgdir trainer/tensor/gpu)" && "$G/gpu.test" -test.v -test.count=1 ) >"$OUT/gpu_test.log" 2>&1
	row "gpu parity tests (trainer/tensor/gpu)" "rc=$? pass=$(grep -c -- '--- PASS' "$OUT/gpu_test.log") fail=$(grep -c -- '--- FAIL' "$OUT/gpu_test.log") skip=$(grep -c -- '--- SKIP' "$OUT/gpu_test.log")"
	fi
	[ $s = parity ] && continue
	( cd "$(pkgdir trainer/model)" && "$G/model.test" -test.v -test.count=1 -test.run 'GPU|TestInputPipelineMatchesReference|TestEvalCacheDevice|TestFitEvalCache|TestPipelineOnePerRun|TestMultiCrossEntropyMasked|TestPassesLendingRaw' ) >"$OUT/model_test.log" 2>&1
	row "gpu model tests (trainer/model)" "rc=$? pass=$(grep -c -- '--- PASS' "$OUT/model_test.log") fail=$(grep -c -- '--- FAIL' "$OUT/model_test.log")"
	grep -h "worst relative\|relative error\|configs trained" "$OUT"/*_test.log | head -20 | tee -a "$summary"
	;;
collectives)
	"$G/collective.test" -test.v -test.count=1 >"$OUT/collective_test.log" 2>&1
	row "collective tests (NCCL world 1)" "rc=$? pass=$(grep -c -- '--- PASS' "$OUT/collective_test.log") fail=$(grep -c -- '--- FAIL' "$OUT/collective_test.log") skip=$(grep -c -- '--- SKIP' "$OUT/collective_test.log")"
	"$G/ctrkit" bench collectives --gpus "${GPUS:-0}" >"$OUT/bench_collectives.log" 2>&1
	row "bench collectives --gpus ${GPUS:-0}" "rc=$?"
	tail -7 "$OUT/bench_collectives.log" | tee -a "$summary"
	;;
quickstart)
	( cd "$W" && /usr/bin/time -f "%e s" "$G/ctrkit" quickstart --device gpu ) >"$OUT/quickstart.log" 2>&1
	row "quickstart --device gpu" "rc=$? $(grep -h 'eval\|train:' "$OUT/quickstart.log" | tail -2 | tr '\n' ' ')"
	;;
dlrm)
	S=$(python3 -c "print(','.join(['1000000']*26))")
	[ -f "$W/dlrm.bin" ] || "$G/ctrkit" gen --format raw --out-source "$W/dlrm.bin" --out-eval-source "$W/dlrm_eval.bin" \
		--num-samples 4194304 --eval-num-samples 65536 --slot-size-array "$S" --alpha 1.2 --seed 1 >"$OUT/dlrm_gen.log" 2>&1
	for m in ${DLRM_MODES:-tf32 tf32-fused fp32 bf16}; do
		flag=""; [ $m = tf32 ] && flag=--tf32; [ $m = bf16 ] && flag=--mixed-precision
		[ $m = tf32-fused ] && flag="--tf32 --fused"  # A/B of the fused dense kernels (off by default)
		"$G/ctrkit" bench train "$W/dlrm.bin" --slot-size-array 1000000 --device gpu $flag --resident --optimizer sgd \
			--warmup 10 --steps 50 >"$OUT/dlrm_$m.log" 2>&1
		row "ctrkit DLRM $m B=65536" "rc=$? $(grep -h 'pipeline:\|resident:' "$OUT/dlrm_$m.log" | tr '\n' ' ')"
	done
	if [ -f "$G/pytorch_dlrm.py" ] && [ "${PYTORCH:-1}" = 1 ]; then
		python3 "$G/pytorch_dlrm.py" 65536 1000000 tf32,fp32,bf16 >"$OUT/pytorch_dlrm.log" 2>&1
		row "pytorch DLRM B=65536" "$(tail -3 "$OUT/pytorch_dlrm.log" | tr '\n' ' ')"
	fi
	;;
pipeline)
	# issue #14: pipeline vs resident batches for DLRM and WDL from a Raw file
	# read with O_DIRECT (--reader async) and from Parquet, and DCNv2 multi-hot.
	S=$(python3 -c "print(','.join(['1000000']*26))")
	[ -f "$W/dlrm.bin" ] || "$G/ctrkit" gen --format raw --out-source "$W/dlrm.bin" --out-eval-source "$W/dlrm_eval.bin" \
		--num-samples 4194304 --eval-num-samples 65536 --slot-size-array "$S" --alpha 1.2 --seed 1 >"$OUT/dlrm_gen.log" 2>&1
	[ -f "$W/pq/_file_list.txt" ] || "$G/ctrkit" gen --format parquet --out-source "$W/pq/_file_list.txt" --out-eval-source "$W/pq/_file_list_eval.txt" \
		--num-files 4 --eval-num-files 1 --num-samples-per-file 262144 --slot-size-array "$S" --alpha 1.2 --seed 1 >"$OUT/pq_gen.log" 2>&1
	"$G/ctrkit" bench train "$W/dlrm.bin" --model dlrm --slot-size-array 1000000 --device gpu --tf32 --resident \
		--warmup 5 --steps 30 >"$OUT/pipe_dlrm_sync.log" 2>&1
	row "bench train dlrm raw sync reader" "rc=$? $(grep -h 'pipeline:\|resident:\|ctrkit:' "$OUT/pipe_dlrm_sync.log" | tr '\n' ' ')"
	for m in dlrm wdl; do
		"$G/ctrkit" bench train "$W/dlrm.bin" --model $m --slot-size-array 1000000 --device gpu --tf32 --resident --reader async \
			--warmup 5 --steps 30 >"$OUT/pipe_${m}_raw.log" 2>&1
		row "bench train $m raw O_DIRECT" "rc=$? $(grep -h 'pipeline:\|resident:\|ctrkit:' "$OUT/pipe_${m}_raw.log" | tr '\n' ' ')"
		"$G/ctrkit" bench train "$W/pq/_file_list.txt" --model $m --slot-size-array 1000000 --device gpu --tf32 --resident \
			--warmup 5 --steps 30 >"$OUT/pipe_${m}_pq.log" 2>&1
		row "bench train $m parquet" "rc=$? $(grep -h 'pipeline:\|resident:\|ctrkit:' "$OUT/pipe_${m}_pq.log" | tr '\n' ' ')"
	done
	NNZ=3,2,1,2,6,1,1,1,1,7,3,8,1,6,9,5,1,1,1,12,100,27,10,3,1,1
	D=$(python3 -c "import json;print(','.join(str(min(s,2000000)) for s in json.load(open('$G/dcnv2_mlperf_1gpu.json'))['layers'][1]['sparse_embedding_hparam']['slot_size_array']))" 2>/dev/null)
	if [ -n "$D" ]; then
		mkdir -p "$W/dcnv2"
		[ -f "$W/dcnv2/dcnv2.bin" ] || "$G/ctrkit" gen --format raw --raw-layout multihot --nnz-array $NNZ --slot-size-array "$D" \
			--out-source "$W/dcnv2/dcnv2.bin" --out-eval-source "$W/dcnv2/dcnv2_eval.bin" --num-samples 1048576 --eval-num-samples 65536 --seed 1 >"$OUT/dcnv2_gen.log" 2>&1
		"$G/ctrkit" bench train "$W/dcnv2/dcnv2.bin" --model dcnv2 --raw-layout multihot --nnz-array $NNZ --slot-size-array "$D" --device gpu --tf32 \
			--resident --reader async --warmup 20 --steps 20 >"$OUT/pipe_dcnv2.log" 2>&1
		row "bench train dcnv2 raw O_DIRECT" "rc=$? $(grep -h 'pipeline:\|resident:\|ctrkit:' "$OUT/pipe_dcnv2.log" | tr '\n' ' ')"
		for rd in sync async; do
			"$G/ctrkit" bench read "$W/dcnv2/dcnv2.bin" --raw-layout multihot --nnz-array $NNZ --slot-size-array "$D" --reader $rd --epochs 2 >"$OUT/read_dcnv2_$rd.log" 2>&1
			row "bench read dcnv2 raw $rd" "rc=$? $(grep -h 'samples/s\|CPU' "$OUT/read_dcnv2_$rd.log" | tr '\n' ' ')"
		done
	fi
	# A 1 M-sample file (16 batches a pass: pass boundaries inside the timed
	# steps; the warm-up covers the first pass-ahead opening, which allocates
	# the second reader's pinned ring once).
	[ -f "$W/dlrm_1048576.bin" ] || "$G/ctrkit" gen --format raw --out-source "$W/dlrm_1048576.bin" --out-eval-source "$W/dlrm_1048576_eval.bin" \
		--num-samples 1048576 --eval-num-samples 65536 --slot-size-array "$S" --alpha 1.2 --seed 1 >"$OUT/dlrm_1m_gen.log" 2>&1
	"$G/ctrkit" bench train "$W/dlrm_1048576.bin" --model dlrm --slot-size-array 1000000 --device gpu --tf32 --resident \
		--warmup 20 --steps 30 >"$OUT/pipe_dlrm_1m.log" 2>&1
	row "bench train dlrm raw sync, 1M file" "rc=$? $(grep -h 'pipeline:\|resident:' "$OUT/pipe_dlrm_1m.log" | tr '\n' ' ')"
	# The readers alone (the pipeline's ceiling): one pass is what a training epoch opens.
	"$G/ctrkit" bench read "$W/pq/_file_list.txt" --epochs 1 >"$OUT/read_pq.log" 2>&1
	row "bench read parquet 1 epoch" "rc=$? $(grep -h 'samples/s' "$OUT/read_pq.log" | tr '\n' ' ')"
	"$G/ctrkit" bench read "$W/pq/_file_list.txt" --epochs 3 >"$OUT/read_pq3.log" 2>&1
	row "bench read parquet 3 epochs" "rc=$? $(grep -h 'samples/s' "$OUT/read_pq3.log" | tr '\n' ' ')"
	;;
profile)
	# issue #18/#14: the per-layer profile of DLRM (TF32) through the pipeline
	# and on the resident batch, from a 4 M-sample file (64 steps a pass) and a
	# 1 M-sample one (15 steps a pass: the pass boundaries fall in the timed
	# steps, where the pipeline used to drain).
	S=$(python3 -c "print(','.join(['1000000']*26))")
	for n in 4194304 1048576; do
		f="$W/dlrm_$n.bin"; [ $n = 4194304 ] && f="$W/dlrm.bin" # the dlrm and pipeline stages' file
		[ -f "$f" ] || "$G/ctrkit" gen --format raw --out-source "$f" --out-eval-source "${f%.bin}_eval.bin" \
			--num-samples $n --eval-num-samples 65536 --slot-size-array "$S" --alpha 1.2 --seed 1 >"$OUT/dlrm_${n}_gen.log" 2>&1
		"$G/ctrkit" bench train "$f" --model dlrm --slot-size-array 1000000 --device gpu --tf32 --resident \
			--warmup 5 --steps 30 --profile --profile-steps 20 >"$OUT/profile_dlrm_$n.log" 2>&1
		row "bench train dlrm --profile, $n samples" "rc=$? $(grep -h 'pipeline:\|resident:\|ctrkit:' "$OUT/profile_dlrm_$n.log" | tr '\n' ' ')"
		cat "$OUT/profile_dlrm_$n.log" | tee -a "$summary"
	done
	# The fused InnerProduct kernels (off by default), profiled the same way.
	"$G/ctrkit" bench train "$W/dlrm.bin" --model dlrm --slot-size-array 1000000 --device gpu --tf32 --fused \
		--warmup 5 --steps 30 --profile --profile-steps 20 >"$OUT/profile_dlrm_fused.log" 2>&1
	row "bench train dlrm --fused --profile" "rc=$? $(grep -h 'pipeline:' "$OUT/profile_dlrm_fused.log" | tr '\n' ' ')"
	cat "$OUT/profile_dlrm_fused.log" | tee -a "$summary"
	;;
algsearch)
	# issue #18: the cuBLASLt algorithm search (algorithm_search) A/B on DLRM
	# TF32, unfused and fused, profiled (resident batch); then DCNv2 unfused.
	( cd "$(pkgdir trainer/tensor/gpu)" && "$G/gpu.test" -test.v -test.count=1 -test.run 'TestAlgoSearch|TestFused|TestGemmBiasAct' ) >"$OUT/algsearch_test.log" 2>&1
	row "gpu TestAlgoSearch|TestFused" "rc=$? pass=$(grep -c -- '--- PASS' "$OUT/algsearch_test.log") fail=$(grep -c -- '--- FAIL' "$OUT/algsearch_test.log")"
	( cd "$(pkgdir trainer/model)" && "$G/model.test" -test.v -test.count=1 -test.run 'TestGPUAlgoSearchFirstStep|TestGPUFusedMatchesUnfused' ) >"$OUT/algsearch_model_test.log" 2>&1
	row "model TestGPUAlgoSearchFirstStep" "rc=$? pass=$(grep -c -- '--- PASS' "$OUT/algsearch_model_test.log") fail=$(grep -c -- '--- FAIL' "$OUT/algsearch_model_test.log")"
	grep -h "first step:\|worst relative" "$OUT/algsearch_model_test.log" | tee -a "$summary"
	S=$(python3 -c "print(','.join(['1000000']*26))")
	[ -f "$W/dlrm.bin" ] || "$G/ctrkit" gen --format raw --out-source "$W/dlrm.bin" --out-eval-source "$W/dlrm_eval.bin" \
		--num-samples 4194304 --eval-num-samples 65536 --slot-size-array "$S" --alpha 1.2 --seed 1 >"$OUT/dlrm_gen.log" 2>&1
	for m in search nosearch fused-search fused-nosearch; do
		flag=""; case $m in *nosearch) flag="--algorithm-search=false";; esac
		case $m in fused*) flag="$flag --fused";; esac
		"$G/ctrkit" bench train "$W/dlrm.bin" --model dlrm --slot-size-array 1000000 --device gpu --tf32 --resident $flag \
			--warmup 5 --steps 30 --profile --profile-steps 20 >"$OUT/algsearch_dlrm_$m.log" 2>&1
		row "dlrm tf32 $m" "rc=$? $(grep -h 'pipeline:\|resident:\|algorithm search' "$OUT/algsearch_dlrm_$m.log" | tr '\n' ' ')"
	done
	grep -h "InnerProduct\|ReLU\|measured step" "$OUT"/algsearch_dlrm_*.log | head -120 >>"$summary"
	NNZ=3,2,1,2,6,1,1,1,1,7,3,8,1,6,9,5,1,1,1,12,100,27,10,3,1,1
	D=$(python3 -c "import json;print(','.join(str(min(s,2000000)) for s in json.load(open('$G/dcnv2_mlperf_1gpu.json'))['layers'][1]['sparse_embedding_hparam']['slot_size_array']))" 2>/dev/null)
	if [ -n "$D" ]; then
		mkdir -p "$W/dcnv2"
		[ -f "$W/dcnv2/dcnv2.bin" ] || "$G/ctrkit" gen --format raw --raw-layout multihot --nnz-array $NNZ --slot-size-array "$D" \
			--out-source "$W/dcnv2/dcnv2.bin" --out-eval-source "$W/dcnv2/dcnv2_eval.bin" --num-samples 1048576 --eval-num-samples 65536 --seed 1 >"$OUT/dcnv2_gen.log" 2>&1
		for m in search nosearch; do
			flag=""; [ $m = nosearch ] && flag="--algorithm-search=false"
			"$G/ctrkit" bench train "$W/dcnv2/dcnv2.bin" --model dcnv2 --raw-layout multihot --nnz-array $NNZ --slot-size-array "$D" --device gpu --tf32 \
				--resident --warmup 5 --steps 20 $flag >"$OUT/algsearch_dcnv2_$m.log" 2>&1
			row "dcnv2 tf32 $m" "rc=$? $(grep -h 'pipeline:\|resident:\|algorithm search' "$OUT/algsearch_dcnv2_$m.log" | tr '\n' ' ')"
		done
	fi
	;;
python)
	if [ -d "$G/python" ]; then
		( cd "$G/python" && CTRKIT_BIN="$G/ctrkit" CTRKIT_DEVICE=gpu python3 -m unittest discover -s tests -t . ) >"$OUT/python.log" 2>&1
		row "python unittest (CTRKIT_DEVICE=gpu)" "rc=$? $(tail -3 "$OUT/python.log" | tr '\n' ' ')"
		grep -A12 "^FAIL:\|^ERROR:" "$OUT/python.log" | head -60
	fi
	;;
conformance)
	( cd "$(pkgdir trainer/model)" && CTRKIT_CONFORMANCE_OUT="$OUT/CONFORMANCE_GPU.md" "$G/model.test" -test.run 'TestConformance$' -test.v ) >"$OUT/conformance.log" 2>&1
	row "conformance on the GPU" "rc=$? $(grep -h 'configs trained\|pass,' "$OUT/conformance.log" | tail -2 | tr '\n' ' ')"
	;;
planted)
	S=$(python3 -c "print(','.join(['1000']*26))")
	[ -f "$W/planted.bin" ] || "$G/ctrkit" gen --format raw --out-source "$W/planted.bin" --out-eval-source "$W/planted_eval.bin" \
		--num-samples 10000000 --eval-num-samples 1000000 --slot-size-array "$S" --seed 7 >"$OUT/planted_gen.log" 2>&1
	row "planted dataset" "$(grep -o 'planted AUC [0-9.]*' "$OUT/planted_gen.log")"
	for opt in ${PLANTED_OPTS:-adam,0.001,3 sgd,0.5,3}; do
		ifs=$IFS; IFS=,; set -- $opt; IFS=$ifs
		"$G/ctrkit" train --model dlrm --slot-size-array "$S" --format raw --source "$W/planted.bin" --eval-source "$W/planted_eval.bin" \
			--batchsize 8192 --num-epochs $3 --display 400 --device gpu --tf32 --optimizer $1 --lr $2 >"$OUT/planted_train_$1.log" 2>&1
		row "train planted 10^7 GPU $1 lr $2, $3 epochs" "rc=$? $(grep -h 'eval iter' "$OUT/planted_train_$1.log" | tr '\n' ' ')"
	done
	;;
readers)
	[ -f "$G/readers_16core.sh" ] && bash "$G/readers_16core.sh" "$G/ctrkit" "$W/readers" 16 >"$OUT/readers.log" 2>&1
	row "readers_16core.sh" "rc=$?"
	tail -12 "$OUT/readers.log" | tee -a "$summary"
	;;
convert)
	[ -f "$G/convert_compare.sh" ] && bash "$G/convert_compare.sh" "$G/ctrkit" "$W/convert" 16 >"$OUT/convert.log" 2>&1
	row "convert_compare.sh" "rc=$?"
	tail -9 "$OUT/convert.log" | tee -a "$summary"
	;;
esac; done
echo "---- summary ----"
cat "$summary"

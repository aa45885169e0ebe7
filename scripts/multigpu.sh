#!/bin/sh
# Issue #20's runs on one machine with two or more GPUs, one command:
#   1. DLRM (MLPerf shape: 26 one-hot slots of 10⁶ rows, global batch 65536)
#      and DCNv2 (multi-hot MLPerf shape) trained 50 SGD steps on 1 GPU, on
#      2 GPUs of one process (--gpus 0,1) and on 2 processes × 1 GPU (the
#      multi-node path: CTRKIT_RANK/CTRKIT_WORLD_SIZE/CTRKIT_MASTER_ADDR over
#      loopback); the losses compared (max relative difference ≤ 1e-3), the
#      2-GPU model files loaded on one GPU and their predictions compared
#      with the 1-GPU model's, the files compared byte for byte;
#   2. bench train --gpus 0 and --gpus 0,1: samples/s in all and per GPU,
#      the scaling 2-GPU ÷ (2 × 1-GPU) (issue: ≥ 0.90), the time in
#      collectives; bench collectives --gpus 0,1 (and nccl-tests'
#      all_reduce_perf / alltoall_perf when on PATH).
# Prints a table last; logs and the table go to $OUT (default
# /tmp/ctrkit-multigpu), data to $WORK (default /tmp/ctrkit-work).
#   sh scripts/multigpu.sh [equal] [scaling] [collectives] [big]   (default: equal scaling collectives)
# `big` trains the DCNv2 tables of issue #20 point 3 (about 200 GB of tables
# and AdaGrad state: BIG_ROWS rows a slot, default 7500000: 26 × 7.5·10⁶ rows
# × 128 floats × 2 copies × 4 bytes) on the GPUs.
# The ctrkit binary: $CTRKIT, else ctrkit beside this script (make gpu's
# .gpu/), else ./ctrkit, else one built with go.
set -u
D=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/ctrkit-multigpu}
W=${WORK:-/tmp/ctrkit-work}
STEPS=${STEPS:-50}
mkdir -p "$OUT" "$W"

n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "$n" -lt 2 ]; then
	echo "multigpu.sh: this machine has $n GPU(s) (nvidia-smi -L); the runs of issue #20 need 2 or more (the nvidia-h200-x2 kind)." >&2
	echo "multigpu.sh: on one GPU, run scripts/gpu_check.sh collectives and the model tests (NCCL with one rank) instead." >&2
	exit 2
fi

for f in "$D"/*.gz; do [ -f "$f" ] && gunzip -f "$f"; done
C=${CTRKIT:-}
[ -z "$C" ] && [ -x "$D/ctrkit" ] && C="$D/ctrkit"
[ -z "$C" ] && [ -x ./ctrkit ] && C=./ctrkit
if [ -z "$C" ]; then
	(cd "$D/.." && CGO_ENABLED=0 go build -o "$W/ctrkit" ./cmd/ctrkit) || { echo "multigpu.sh: no ctrkit binary (set CTRKIT)" >&2; exit 2; }
	C="$W/ctrkit"
fi
export CTRKIT_KERNEL_CACHE="$W/kernels" CTRKIT_REQUIRE_GPU=1

summary="$OUT/summary.txt"
: >"$summary"
row() { printf '%-44s %s\n' "$1" "$2" | tee -a "$summary"; }
row "gpus" "$n: $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | head -1)"
row "nccl" "$(nvidia-smi topo -m 2>/dev/null | head -3 | tail -1 | cut -c1-60)"

# losses FILE: the display losses of an --out-metrics file, one a line.
losses() { grep -o '"loss": *[-0-9.eE+]*' "$1" | sed 's/.*: *//'; }
# maxrel A B: the largest relative difference of two loss lists.
maxrel() {
	losses "$1" >"$OUT/.a"; losses "$2" >"$OUT/.b"
	if [ ! -s "$OUT/.a" ] || [ "$(wc -l <"$OUT/.a")" != "$(wc -l <"$OUT/.b")" ]; then echo "n/a (missing losses)"; return; fi
	paste "$OUT/.a" "$OUT/.b" | awk '{d=$1-$2; if(d<0)d=-d; r=d/($2<0?-$2:$2); if(r>m)m=r} END{printf "%.3g over %d steps %s\n", m, NR, (m<=1e-3?"ok":"FAIL")}'
}
# maxabs A B: the largest absolute difference of two prediction files.
maxabs() {
	paste -d' ' "$1" "$2" | awk '{d=$1-$2; if(d<0)d=-d; if(d>m)m=d} END{printf "%.3g over %d samples %s\n", m, NR, (m<=1e-3?"ok":"FAIL")}'
}
samedir() { if diff -r "$1" "$2" >/dev/null 2>&1; then echo "byte-identical"; else echo "differ (float sums in another order)"; fi; }

S=$(printf '1000000,%.0s' $(seq 26) | sed 's/,$//')
NNZ=3,2,1,2,6,1,1,1,1,7,3,8,1,6,9,5,1,1,1,12,100,27,10,3,1,1
DS=${DCNV2_SIZES:-$S}
data() {
	[ -f "$W/dlrm.bin" ] || "$C" gen --format raw --out-source "$W/dlrm.bin" --out-eval-source "$W/dlrm_eval.bin" \
		--num-samples 4194304 --eval-num-samples 65536 --slot-size-array "$S" --alpha 1.2 --seed 1 >"$OUT/dlrm_gen.log" 2>&1
	mkdir -p "$W/dcnv2"
	[ -f "$W/dcnv2/dcnv2.bin" ] || "$C" gen --format raw --raw-layout multihot --nnz-array $NNZ --slot-size-array "$DS" \
		--out-source "$W/dcnv2/dcnv2.bin" --out-eval-source "$W/dcnv2/dcnv2_eval.bin" --num-samples 1048576 --eval-num-samples 65536 --seed 1 >"$OUT/dcnv2_gen.log" 2>&1
}
# shape MODEL: the data flags of MODEL's dataset (evaluation data only:
# shape MODEL eval).
shape() {
	case $1 in
	dlrm) src=$W/dlrm.bin ev=$W/dlrm_eval.bin f="--slot-size-array $S" ;;
	dcnv2) src=$W/dcnv2/dcnv2.bin ev=$W/dcnv2/dcnv2_eval.bin f="--raw-layout multihot --nnz-array $NNZ --slot-size-array $DS" ;;
	esac
	if [ "${2:-}" = eval ]; then echo "--eval-source $ev $f"; else echo "--source $src $f"; fi
}

stages=${*:-equal scaling collectives}
for s in $stages; do case $s in
equal)
	data
	for m in dlrm dcnv2; do
		A="train --model $m $(shape $m) --batchsize 65536 --max-iter $STEPS --display 1 --optimizer sgd --lr 0.01 --device gpu --tf32 --seed 1"
		"$C" $A --gpus 0 --out-metrics "$OUT/${m}_1gpu.jsonl" --snapshot-prefix "$W/eq/$m/1gpu/m" >"$OUT/${m}_1gpu.log" 2>&1
		row "$m train 1 GPU" "rc=$? $(grep -h 'trained\|ctrkit:' "$OUT/${m}_1gpu.log" | tail -1)"
		"$C" $A --gpus 0,1 --out-metrics "$OUT/${m}_2gpu.jsonl" --snapshot-prefix "$W/eq/$m/2gpu/m" >"$OUT/${m}_2gpu.log" 2>&1
		row "$m train --gpus 0,1" "rc=$? $(grep -h 'trained\|ctrkit:' "$OUT/${m}_2gpu.log" | tail -1)"
		row "$m losses 2 GPUs vs 1" "$(maxrel "$OUT/${m}_2gpu.jsonl" "$OUT/${m}_1gpu.jsonl")"
		port=$((29700 + $(od -An -N1 -tu1 /dev/urandom)))
		for r in 0 1; do
			CTRKIT_RANK=$r CTRKIT_WORLD_SIZE=2 CTRKIT_MASTER_ADDR=127.0.0.1:$port \
				"$C" $A --gpus $r --timeout 120s --out-metrics "$OUT/${m}_2proc.jsonl" --snapshot-prefix "$W/eq/$m/2proc/m" >"$OUT/${m}_2proc_$r.log" 2>&1 &
		done
		wait
		row "$m train 2 processes × 1 GPU" "$(grep -h 'trained\|ctrkit:' "$OUT/${m}_2proc_0.log" "$OUT/${m}_2proc_1.log" | tail -2 | tr '\n' ' ')"
		row "$m losses 2 processes vs 1 GPU" "$(maxrel "$OUT/${m}_2proc.jsonl" "$OUT/${m}_1gpu.jsonl")"
		row "$m files 2 GPUs vs 1 GPU" "$(samedir "$W/eq/$m/2gpu" "$W/eq/$m/1gpu")"
		row "$m files 2 processes vs 2 GPUs" "$(samedir "$W/eq/$m/2proc" "$W/eq/$m/2gpu")"
		P="predict --model $m $(shape $m eval) --batchsize 65536 --device gpu --tf32 --max-eval-batches 1"
		"$C" $P --load-prefix "$W/eq/$m/1gpu/m" --load-iter $STEPS -o "$OUT/${m}_pred_1gpu.txt" >"$OUT/${m}_pred_1gpu.log" 2>&1
		"$C" $P --load-prefix "$W/eq/$m/2gpu/m" --load-iter $STEPS -o "$OUT/${m}_pred_2gpu.txt" >"$OUT/${m}_pred_2gpu.log" 2>&1
		row "$m 2-GPU files predicted on 1 GPU" "rc=$? vs the 1-GPU model: $(maxabs "$OUT/${m}_pred_2gpu.txt" "$OUT/${m}_pred_1gpu.txt")"
	done
	;;
scaling)
	data
	for m in dlrm dcnv2; do
		case $m in
		dlrm) B="bench train $W/dlrm.bin --model dlrm --slot-size-array 1000000" ;;
		dcnv2) B="bench train $W/dcnv2/dcnv2.bin --model dcnv2 --raw-layout multihot --nnz-array $NNZ --slot-size-array $DS" ;;
		esac
		B="$B --device gpu --tf32 --optimizer sgd --batchsize 65536 --warmup 10 --steps $STEPS --json"
		"$C" $B >"$OUT/bench_${m}_1gpu.json" 2>"$OUT/bench_${m}_1gpu.log"
		one=$(grep -o '"SamplesPerSec": *[0-9.e+]*' "$OUT/bench_${m}_1gpu.json" | head -1 | sed 's/.*: *//')
		"$C" $B --gpus 0,1 >"$OUT/bench_${m}_2gpu.json" 2>"$OUT/bench_${m}_2gpu.log"
		two=$(grep -o '"SamplesPerSec": *[0-9.e+]*' "$OUT/bench_${m}_2gpu.json" | head -1 | sed 's/.*: *//')
		coll=$(tr -d '\n ' <"$OUT/bench_${m}_2gpu.json" | grep -o '"collective_ms_per_step":{[^}]*}' | sed 's/"collective_ms_per_step"://')
		share=$(grep -o '"collective_share": *[0-9.e+-]*' "$OUT/bench_${m}_2gpu.json" | sed 's/.*: *//')
		row "$m bench 1 GPU (samples/s)" "${one:-n/a} $(grep -h 'ctrkit:' "$OUT/bench_${m}_1gpu.log")"
		row "$m bench --gpus 0,1 (samples/s in all)" "${two:-n/a} $(grep -h 'ctrkit:' "$OUT/bench_${m}_2gpu.log")"
		if [ -n "$one" ] && [ -n "$two" ]; then
			row "$m per GPU; scaling 2-GPU/(2×1-GPU)" "$(awk -v a="$one" -v b="$two" 'BEGIN{r=b/(2*a); printf "%.0f samples/s a GPU; %.3f %s", b/2, r, (r>=0.90?"ok (≥ 0.90)":"below 0.90")}')"
		fi
		row "$m collectives ms/step (share)" "${coll:-n/a} (${share:-n/a})"
	done
	;;
collectives)
	"$C" bench collectives --gpus 0,1 >"$OUT/bench_collectives.log" 2>&1
	row "bench collectives --gpus 0,1" "rc=$?"
	tail -7 "$OUT/bench_collectives.log" | tee -a "$summary"
	for t in all_reduce_perf alltoall_perf; do
		if command -v $t >/dev/null 2>&1; then
			$t -b 1M -e 128M -f 4 -g 2 >"$OUT/nccl_tests_$t.log" 2>&1
			row "nccl-tests $t -g 2" "$(grep -i 'avg bus bandwidth' "$OUT/nccl_tests_$t.log")"
			grep -E '^ +[0-9]+ ' "$OUT/nccl_tests_$t.log" | tail -3 | tee -a "$summary"
		else
			row "nccl-tests $t" "not on PATH"
		fi
	done
	;;
big)
	# Issue #20 point 3: DCNv2 tables with AdaGrad state beyond one GPU
	# (BIG_ROWS rows in each of 26 slots, 128 wide: ~200 GB with the state
	# at 7.5·10⁶), each GPU holding its shard.
	R=${BIG_ROWS:-7500000}
	BS=$(printf "$R,%.0s" $(seq 26) | sed 's/,$//')
	mkdir -p "$W/big"
	[ -f "$W/big/big.bin" ] || "$C" gen --format raw --out-source "$W/big/big.bin" --out-eval-source "$W/big/big_eval.bin" \
		--num-samples 1048576 --eval-num-samples 65536 --slot-size-array "$BS" --alpha 1.05 --seed 1 >"$OUT/big_gen.log" 2>&1
	"$C" train --model dcnv2 --source "$W/big/big.bin" --slot-size-array "$BS" --batchsize 65536 --max-iter 20 --display 5 \
		--device gpu --tf32 --gpus "${BIG_GPUS:-0,1}" >"$OUT/big.log" 2>&1
	row "dcnv2 $R rows × 26 slots on --gpus ${BIG_GPUS:-0,1}" "rc=$? $(grep -h 'model:\|trained\|ctrkit:' "$OUT/big.log" | tr '\n' ' ')"
	nvidia-smi --query-gpu=index,memory.used --format=csv,noheader >>"$OUT/big.log" 2>&1
	;;
*)
	echo "multigpu.sh: unknown stage $s (equal, scaling, collectives, big)" >&2
	exit 2
	;;
esac; done
echo "---"
cat "$summary"

#!/usr/bin/env bash
# Multi-hot DLRM-DCNv2 read path on the GPU machine (16 cores, issue #14
# acceptance 3): the sync Raw reader's scaling with workers, the RawAsync
# (O_DIRECT) reader, and `bench train --model dcnv2` through the pipeline
# against resident batches.
#
#   bench/dcnv2_pipeline.sh CTRKIT_BINARY WORKDIR [samples]
#
# WORKDIR must be on the machine's disk (not tmpfs) for O_DIRECT to mean the
# storage. Prints each command before its output.
set -euo pipefail
B=$(realpath "${1:?usage: dcnv2_pipeline.sh CTRKIT WORKDIR [samples]}")
W=${2:?workdir}; N=${3:-1048576}
mkdir -p "$W"; cd "$W"
NNZ=3,2,1,2,6,1,1,1,1,7,3,8,1,6,9,5,1,1,1,12,100,27,10,3,1,1
SIZES=${SIZES:-$(python3 -c "print(','.join(['2000000']*26))")} # the run's --slot-size-array
S=(--raw-layout multihot --nnz-array "$NNZ" --slot-size-array "$SIZES")
F=(--from raw "${S[@]}")
[ -f dcnv2.bin ] || "$B" gen --format raw --raw-layout multihot --nnz-array "$NNZ" --slot-size-array "$SIZES" \
	--num-samples "$N" --eval-num-samples 65536 --seed 1 --no-sync --out-source dcnv2.bin >/dev/null
run() { echo "+ ctrkit $*"; "$B" "$@"; echo; }
for w in 1 2 4 8 16; do
	run bench read dcnv2.bin "${F[@]}" --reader sync --num-workers "$w" --epochs 8
done
run bench read dcnv2.bin "${F[@]}" --reader async --epochs 8
run bench read dcnv2.bin "${F[@]}" --reader async --epochs 8 --drop-cache
# --warmup 40: the first two passes' readers (opened 4 batches before each
# pass ends) allocate the pinned decode ring and the I/O buffers for the
# first time; from the third pass on both come from the caches.
run bench train dcnv2.bin "${S[@]}" --model dcnv2 --device gpu --tf32 --resident --reader async --warmup 40 --steps 100
run bench train dcnv2.bin "${S[@]}" --model dcnv2 --device gpu --tf32 --resident --reader sync --warmup 40 --steps 100

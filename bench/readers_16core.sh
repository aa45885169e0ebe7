#!/usr/bin/env bash
# Reader throughput on a many-core machine (the GPU host: 16 cores, page
# cache), in one run:
#   1. Parquet, Criteo shape, 8M rows, snappy and uncompressed: ctrkit's reader
#      against pyarrow.parquet (ParquetDataset.read, use_threads) with the same
#      thread count; prints rows/s and the ratio.
#   2. Raw multi-hot DLRM-DCNv2 layout (912 B/sample): the RawAsync reader from
#      the page cache, target ≥ 13.4 GB/s of file bytes with 16 threads; with
#      O_DIRECT from the disk beside the disk's own ceiling (parallel dd
#      O_DIRECT reads of the same file).
#
#   bench/readers_16core.sh CTRKIT_BINARY WORKDIR [threads]
# Needs python3 with pyarrow. Prints a table last.
set -euo pipefail
H=$(cd "$(dirname "$0")" && pwd) # pyarrow_read.py lies beside this script
B=$(realpath "${1:?usage: readers_16core.sh CTRKIT WORKDIR [threads]}")
W=${2:?workdir}; T=${3:-16}
mkdir -p "$W"; cd "$W"
SIZES=$(python3 -c "print(','.join(['1000000']*26))")
NNZ=3,2,1,2,6,1,1,1,1,7,3,8,1,6,9,5,1,1,1,12,100,27,10,3,1,1

[ -f pq/file_list.txt ] || "$B" gen --format parquet --num-files 32 --eval-num-files 1 --num-samples-per-file 262144 \
	--slot-size-array "$SIZES" --seed 1 --num-workers "$T" --label-mode uniform --out-source pq/file_list.txt --out-eval-source pq/file_list_test.txt >/dev/null
[ -f pqnone/_file_list.txt ] || "$B" convert pq/file_list.txt pqnone --to parquet --compression none --nnz-array 1 --out-key-type i64 >/dev/null 2>&1
[ -f raw/train.bin ] || "$B" gen --format raw --num-samples 3000000 --eval-num-samples 1000 --raw-layout multihot --nnz-array "$NNZ" \
	--slot-size-array "$SIZES" --float-label-dense --seed 2 --num-workers "$T" --label-mode uniform --out-source raw/train.bin --out-eval-source raw/test.bin >/dev/null

pyarrow() { python3 "$H/pyarrow_read.py" "$1" "$T"; } # list → rows/s (best of 3), bytes
ours() { "$B" bench read "$@" --json | python3 -c "import json,sys; r=json.load(sys.stdin); print(f\"{r['samples_per_second']:.0f} {r['file_bytes_per_second']/1e9:.2f}\")"; }

pa_snappy=$(pyarrow pq/file_list.txt); pa_none=$(pyarrow pqnone/_file_list.txt)
ck_snappy=$(ours pq/file_list.txt --i64-input-key --num-workers "$T" --epochs 3)
ck_none=$(ours pqnone/_file_list.txt --i64-input-key --num-workers "$T" --epochs 3)
cat raw/train.bin > /dev/null
ra_buf=$(ours raw/train.bin --nnz-array "$NNZ" --float-label-dense --reader async --buffered --num-threads "$T" --num-workers "$T" --epochs 16)
ra_dir=$(ours raw/train.bin --nnz-array "$NNZ" --float-label-dense --reader async --num-threads "$T" --num-workers "$T" --io-depth 8 --io-block-size 1048576 --epochs 1)
ra_sync=$(ours raw/train.bin --nnz-array "$NNZ" --float-label-dense --num-workers "$T" --epochs 3)
# The disk's own O_DIRECT ceiling on the same file: 8 dd streams of 1 MiB
# blocks over its eighths (a queue depth of 8, as --io-depth 8), GB/s.
size=$(stat -c %s raw/train.bin); part=$((size / 8 / 1048576))
t0=$(date +%s.%N)
for i in 0 1 2 3 4 5 6 7; do dd if=raw/train.bin of=/dev/null bs=1M iflag=direct skip=$((i * part)) count=$part status=none & done; wait
dd_rate=$(awk -v b=$((8 * part * 1048576)) -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN{printf "%.2f", b/(t1-t0)/1e9}')

echo
printf '%-44s %14s %10s %8s\n' "workload (threads=$T)" "rows/s" "GB/s file" "vs ref"
set -- $pa_snappy; pas=$1; set -- $ck_snappy
printf '%-44s %14s %10s %8s\n' "parquet snappy: pyarrow ParquetDataset.read" "$pas" "" "1.00"
printf '%-44s %14s %10s %8.2f\n' "parquet snappy: ctrkit reader (i64 keys)" "$1" "$2" "$(awk -v a="$1" -v b="$pas" 'BEGIN{print a/b}')"
set -- $pa_none; pan=$1; set -- $ck_none
printf '%-44s %14s %10s %8s\n' "parquet none: pyarrow ParquetDataset.read" "$pan" "" "1.00"
printf '%-44s %14s %10s %8.2f\n' "parquet none: ctrkit reader (i64 keys)" "$1" "$2" "$(awk -v a="$1" -v b="$pan" 'BEGIN{print a/b}')"
set -- $ra_buf;  printf '%-44s %14s %10s %8s\n' "raw dcnv2 912B: async, page cache" "$1" "$2" "(13.4)"
set -- $ra_dir;  printf '%-44s %14s %10s %8s\n' "raw dcnv2 912B: async, O_DIRECT from disk" "$1" "$2" ""
set -- $ra_sync; printf '%-44s %14s %10s %8s\n' "raw dcnv2 912B: sync reader, page cache" "$1" "$2" ""
printf '%-44s %14s %10s %8s\n' "raw: dd O_DIRECT, 8 streams of 1 MiB (disk)" "" "$dd_rate" ""

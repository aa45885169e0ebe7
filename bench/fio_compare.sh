#!/usr/bin/env bash
# Compare ctrkit's async O_DIRECT Raw reader with fio on the same file, same
# block size, queue depth and thread count, in one run, and print the ratios.
#
#   bench/fio_compare.sh FILE.raw [threads] [io_depth] [block_size_bytes] [-- schema flags for ctrkit]
#
# fio: Debian package `fio` (installed when missing and we are root).
# Prints three rows: fio, ctrkit raw I/O only (--io-only), ctrkit I/O + decode.
set -euo pipefail
file=${1:?usage: fio_compare.sh FILE.raw [threads] [io_depth] [block_size] [-- ctrkit schema flags]}
threads=${2:-2}; depth=${3:-4}; bs=${4:-1048576}
shift $(( $# < 4 ? $# : 4 ))
[ "${1:-}" = "--" ] && shift
schema=("$@")
[ ${#schema[@]} -gt 0 ] || schema=(--label-dim 1 --dense-dim 13 --num-slot 26)

cd "$(dirname "$0")/.."
command -v fio >/dev/null || { [ "$(id -u)" = 0 ] && (apt-get update -qq && apt-get install -y -qq fio) >/dev/null; }
command -v jq >/dev/null || { [ "$(id -u)" = 0 ] && (apt-get install -y -qq jq) >/dev/null; }
CGO_ENABLED=0 go build -o /tmp/ctrkit-bench ./cmd/ctrkit

size=$(stat -c %s "$file")
per=$(( size / threads / bs * bs ))
drop() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; }

drop
fio_json=$(fio --name=seqread --filename="$file" --readonly --direct=1 --rw=read --ioengine=libaio \
	--bs="$bs" --iodepth="$depth" --numjobs="$threads" --size="$per" --offset_increment="$per" \
	--group_reporting --output-format=json)
fio_bps=$(echo "$fio_json" | jq '.jobs[0].read.bw_bytes')

drop
io_json=$(/tmp/ctrkit-bench bench read "$file" "${schema[@]}" --reader async --io-only --epochs 1 \
	--num-threads "$threads" --io-depth "$depth" --io-block-size "$bs" --json)
io_bps=$(echo "$io_json" | jq '.file_bytes_per_second')

drop
e2e_json=$(/tmp/ctrkit-bench bench read "$file" "${schema[@]}" --reader async --epochs 1 \
	--num-threads "$threads" --io-depth "$depth" --io-block-size "$bs" --json)
e2e_bps=$(echo "$e2e_json" | jq '.file_bytes_per_second')

printf '%-28s %12s %8s\n' "run (threads=$threads depth=$depth bs=$bs)" "MB/s" "vs fio"
awk -v f="$fio_bps" -v i="$io_bps" -v e="$e2e_bps" 'BEGIN {
	printf "%-28s %12.1f %8s\n", "fio libaio --direct=1", f/1e6, "1.00";
	printf "%-28s %12.1f %8.3f\n", "ctrkit async, I/O only", i/1e6, i/f;
	printf "%-28s %12.1f %8.3f\n", "ctrkit async, I/O + decode", e/1e6, e/f }'

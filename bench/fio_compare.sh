#!/usr/bin/env bash
# Compare ctrkit's async O_DIRECT Raw reader with fio on the same file, same
# block size, queue depth and thread count, in one run, and print the ratios.
#
#   bench/fio_compare.sh FILE.raw [threads] [io_depth] [block_size_bytes] [-- schema flags for ctrkit]
#
# fio: Debian package `fio` (installed when missing and we are root).
# Prints four rows: fio, ctrkit raw I/O only (--io-only), ctrkit I/O + decode,
# and the decode ceiling: the same async reader and decode workers over the
# file held in the page cache (--buffered, after a warm-up pass), which is
# what decoding alone sustains on this machine at the same moment (it still
# copies from the page cache, so it is a lower bound on pure decode speed).
# The verdict compares I/O only with fio (goal ≥ 0.95) and I/O + decode with
# the smaller of fio and the decode ceiling (goal ≥ 0.90), and names the
# limit. Each ctrkit row also gives its CPU use (100 = one core busy).
# Set FIO_COMPARE_NOCACHE=1 to skip the decode-ceiling row.
#
# Virtual disks are noisy (the host may cache, throttle or burst), so the
# measurement runs FIO_COMPARE_ROUNDS rounds (default 3), each one fio, I/O
# only, I/O + decode and the ceiling back to back after dropping the page
# cache (rotating their order from round to round), prints every round, and
# judges on the median of the per-round ratios (the medians of the rates are
# printed too).
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
rounds=${FIO_COMPARE_ROUNDS:-3}
drop() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; }
ctrkit() { /tmp/ctrkit-bench bench read "$file" "${schema[@]}" --reader async --epochs 1 \
	--num-threads "$threads" --io-depth "$depth" --io-block-size "$bs" --json "$@"; }

rows=() # per round: fio io e2e cached io_cpu e2e_cpu cached_cpu
run_fio() {
	fio_json=$(fio --name=seqread --filename="$file" --readonly --direct=1 --rw=read --ioengine=libaio \
		--bs="$bs" --iodepth="$depth" --numjobs="$threads" --size="$per" --offset_increment="$per" \
		--group_reporting --output-format=json)
	fio_bps=$(echo "$fio_json" | jq '.jobs[0].read.bw_bytes')
}
run_io() { io_json=$(ctrkit --io-only); }
run_e2e() { e2e_json=$(ctrkit); }
steps=(run_fio run_io run_e2e)
for ((round = 1; round <= rounds; round++)); do
	# Rotate the order of the three measured steps from round to round, so
	# that none of them always follows the same read of the file (a host
	# cache behind a virtual disk favours some orders).
	for ((k = 0; k < 3; k++)); do
		drop
		${steps[(round - 1 + k) % 3]}
	done
	cached_json='{"file_bytes_per_second":0,"cpu_percent":0}'
	if [ "${FIO_COMPARE_NOCACHE:-0}" != 1 ]; then
		cat "$file" >/dev/null # warm the page cache
		cached_json=$(ctrkit --buffered)
	fi
	rows+=("$fio_bps $(echo "$io_json" | jq '.file_bytes_per_second') $(echo "$e2e_json" | jq '.file_bytes_per_second') \
$(echo "$cached_json" | jq '.file_bytes_per_second') $(echo "$io_json" | jq '.cpu_percent') \
$(echo "$e2e_json" | jq '.cpu_percent') $(echo "$cached_json" | jq '.cpu_percent')")
done
drop
engine=$(echo "$e2e_json" | jq -r '.engine // "?"')
workers=$(echo "$e2e_json" | jq -r 'if (.workers // 0) > 0 then .workers else "GOMAXPROCS" end')
direct=$(echo "$e2e_json" | jq -r '.direct_io')

echo "file $file ($size bytes), engine $engine, direct I/O $direct, $workers decode workers, $(nproc) CPUs, $rounds rounds"
printf '%s\n' "${rows[@]}" | awk -v t="$threads" -v d="$depth" -v b="$bs" '
function med(a, n,   i, j, x) { # median of a[1..n] (sorts a)
	for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j+1] = a[j]; a[j+1] = x }
	return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2 }
{ n++; f[n] = $1; i[n] = $2; e[n] = $3; c[n] = $4; ic[n] = $5; ec[n] = $6; cc[n] = $7
  ri[n] = $2 / $1; lim = ($4 > 0 && $4 < $1) ? $4 : $1; re[n] = $3 / lim; rc[n] = ($4 > 0) ? $4 / $1 : 0; lf[n] = (lim == $1)
  printf "round %d: fio %.1f MB/s, I/O only %.1f (%.3f), I/O + decode %.1f (%.3f of %s), decode ceiling %.1f MB/s\n",
	n, $1/1e6, $2/1e6, ri[n], $3/1e6, re[n], lf[n] ? "fio" : "ceiling", $4/1e6 }
END {
	for (k = 1; k <= n; k++) fio_limit += lf[k]
	printf "%-40s %10s %8s %6s\n", "median (threads=" t " depth=" d " bs=" b ")", "MB/s", "vs fio", "CPU%"
	F = med(f, n)
	printf "%-40s %10.1f %8s %6s\n", "fio libaio --direct=1", F/1e6, "1.000", "-"
	printf "%-40s %10.1f %8.3f %6.0f\n", "ctrkit async, I/O only", med(i, n)/1e6, med(i, n)/F, med(ic, n)
	printf "%-40s %10.1f %8.3f %6.0f\n", "ctrkit async, I/O + decode", med(e, n)/1e6, med(e, n)/F, med(ec, n)
	if (med(c, n) > 0) printf "%-40s %10.1f %8.3f %6.0f\n", "ctrkit async, decode ceiling (page cache)", med(c, n)/1e6, med(c, n)/F, med(cc, n)
	I = med(ri, n); E = med(re, n)
	printf "verdict (median of per-round ratios): I/O only %.3f of fio (goal 0.95: %s); I/O + decode %.3f of the limit, which was %s in %d of %d rounds (goal 0.90: %s)\n",
		I, (I >= 0.95 ? "met" : "NOT met"), E, (fio_limit * 2 >= n ? "fio" : "the decode ceiling"), (fio_limit * 2 >= n ? fio_limit : n - fio_limit), n, (E >= 0.90 ? "met" : "NOT met") }'

#!/usr/bin/env bash
# Conversion against decoding, in one run (issue #4, acceptance 5): a ~1 GB
# Norm dataset (4M samples, Criteo shape: 1 label, 13 dense, 26 one-hot
# slots, checksum) is converted Norm → Parquet (snappy) → Raw, each step
# under /usr/bin/time -v for its peak memory (twice; the faster run is
# shown); then `ctrkit bench read`
# decodes each of the three datasets from the page cache with the same
# thread count. Prints samples/s, peak RSS and each conversion's ratio to the
# slower decode of its two formats (with `threads` workers, and with one).
#
#   bench/convert_compare.sh CTRKIT_BINARY WORKDIR [threads]
#
# WORKDIR should be in memory (/dev/shm) so that the disk does not set the
# pace; it ends up holding ~2.2 GB.
set -euo pipefail
B=$(realpath "${1:?usage: convert_compare.sh CTRKIT WORKDIR [threads]}")
W=${2:?workdir}; T=${3:-$(nproc)}
mkdir -p "$W"; cd "$W"
SIZES=$(python3 -c "print(','.join(['100000']*26))" 2>/dev/null || printf '100000%.0s,' $(seq 26) | sed 's/,$//')

[ -f n/file_list.txt ] || "$B" gen --format norm --num-files 100 --num-samples-per-file 40000 --eval-num-files 1 \
	--slot-size-array "$SIZES" --seed 7 --num-workers "$T" --out-source n/file_list.txt --out-eval-source n/file_list_test.txt >/dev/null

# run OUT CMD…: runs CMD, prints "samples/s peak-RSS-MB wall-s"; the
# samples/s are those the command reports.
run() {
	local out=$1; shift
	if [ -x /usr/bin/time ]; then
		/usr/bin/time -v -o "$out.time" "$@" >"$out.log" 2>&1
		rss=$(awk -F: '/Maximum resident set size/ {print $2/1024}' "$out.time")
		wall=$(awk '/Elapsed \(wall clock\)/ {n=split($NF, a, ":"); s=0; for (i=1; i<=n; i++) s=s*60+a[i]; print s}' "$out.time")
	else # no GNU time (the GPU host): the children's peak RSS from Python
		read -r rss wall < <(python3 - "$out.log" "$@" <<'PY'
import resource, subprocess, sys, time
t0 = time.perf_counter()
with open(sys.argv[1], "w") as log:
    subprocess.run(sys.argv[2:], stdout=log, stderr=subprocess.STDOUT, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, time.perf_counter() - t0)
PY
)
	fi
	sps=$(grep -o '([0-9]* samples/s' "$out.log" | tr -dc 0-9)
	printf '%s %.0f %.2f\n' "$sps" "$rss" "$wall"
}
decode() { # decode PATH WORKERS FLAGS… → samples/s (2 epochs)
	local p=$1 w=$2; shift 2
	"$B" bench read "$p" --num-workers "$w" --epochs 2 --json "$@" | python3 -c "import json,sys; print(f\"{json.load(sys.stdin)['samples_per_second']:.0f}\")"
}

best() { printf '%s\n' "$@" | sort -n | tail -1; } # the run with the most samples/s
rm -rf pq raw.bin
np1=$(run np "$B" convert n/file_list.txt pq --to parquet --nnz-array 1 --num-workers "$T")
pr1=$(run pr "$B" convert pq raw.bin --to raw --out-float-label-dense --num-workers "$T")
rm -rf pq raw.bin # twice each, as the decodes read two epochs: the better run counts
np=$(best "$np1" "$(run np "$B" convert n/file_list.txt pq --to parquet --nnz-array 1 --num-workers "$T")")
pr=$(best "$pr1" "$(run pr "$B" convert pq raw.bin --to raw --out-float-label-dense --num-workers "$T")")
dn=$(decode n/file_list.txt "$T"); dp=$(decode pq "$T"); dr=$(decode raw.bin "$T" --nnz-array 1 --float-label-dense)
dn1=$(decode n/file_list.txt 1); dp1=$(decode pq 1); dr1=$(decode raw.bin 1 --nnz-array 1 --float-label-dense)
slower() { printf '%s\n' "$@" | sort -n | head -1; }

echo
echo "norm $(du -sh n | cut -f1), parquet $(du -sh pq | cut -f1), raw $(du -sh raw.bin | cut -f1); threads=$T"
echo "ratio: a step's samples/s over the slower decode of its two formats (with $T workers, and with 1)"
printf '%-20s %12s %12s %8s %10s %10s\n' "step" "samples/s" "peak RSS MB" "wall s" "vs decode" "vs 1-worker"
step() { # name "samples rss wall" decodeA decodeB decodeA1 decodeB1
	local name=$1; set -- $2 "$3" "$4" "$5" "$6"
	local s=$(slower "$4" "$5") s1=$(slower "$6" "$7")
	printf '%-20s %12s %12s %8s %10.2f %10.2f\n' "$name" "$1" "$2" "$3" \
		"$(awk -v a="$1" -v b="$s" 'BEGIN{print a/b}')" "$(awk -v a="$1" -v b="$s1" 'BEGIN{print a/b}')"
}
step "norm → parquet" "$np" "$dn" "$dp" "$dn1" "$dp1"
step "parquet → raw" "$pr" "$dp" "$dr" "$dp1" "$dr1"
printf '%-20s %12s %12s\n' "decode" "$T workers" "1 worker"
printf '%-20s %12s %12s\n' "  norm" "$dn" "$dn1"
printf '%-20s %12s %12s\n' "  parquet" "$dp" "$dp1"
printf '%-20s %12s %12s\n' "  raw" "$dr" "$dr1"

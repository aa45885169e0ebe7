#!/usr/bin/env bash
# Compare ctrkit's Parquet reader with DuckDB on the same files and thread
# count, in one run: DuckDB sums every selected column; ctrkit decodes the same
# columns into batches (64-bit keys). DuckDB runs in one process: a warm-up,
# then the best of 3 queries. ctrkit is timed twice: the same way (one
# process, the best epoch after the first of 4), and as issue #14's target
# reads it, a fresh process for one epoch (best of 3 processes; the last
# line, its ratio the one to compare with 1.0). CPU seconds (user+sys, of
# the timed query or epoch alone, every thread) are printed beside each
# rate: on a shared machine they swing less than the rates do, and the load
# average before and after the run says how shared it was.
#
#   bench/duckdb_compare.sh DIR/_file_list.txt [threads]
#
# DuckDB comes from npm (@duckdb/node-api), installed into a temporary folder,
# or found in $DUCKDB_DIR (a folder where `npm install @duckdb/node-api` ran;
# installed there when missing), so that repeated runs skip the install.
set -euo pipefail
list=$(realpath "${1:?usage: duckdb_compare.sh FILE_LIST [threads]}")
threads=${2:-2}
cd "$(dirname "$0")/.."
CGO_ENABLED=0 go build -o /tmp/ctrkit-bench ./cmd/ctrkit
command -v jq >/dev/null || { [ "$(id -u)" = 0 ] && (apt-get update -qq && apt-get install -y -qq jq) >/dev/null; }

dir=$(cd "$(dirname "$list")" && pwd)
files=$(tail -n +2 "$list" | head -n "$(head -1 "$list")" | while read -r f; do
	case "$f" in /*) echo "$f";; *) [ -e "$f" ] && realpath "$f" || echo "$dir/$f";; esac; done)
# _metadata.json lies next to the first data file (as OpenList reads it).
meta=$(dirname "$(echo "$files" | head -1)")/_metadata.json
cols=$(jq -r '[.labels[], .conts[], .cats[]] | map(.col_name) | join(",")' "$meta")
# 64-bit keys, as DuckDB sums the cat columns as int64.
key=(--i64-input-key)

load0=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo '?')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
duckdir=${DUCKDB_DIR:-$tmp}
mkdir -p "$duckdir"
[ -e "$duckdir/node_modules/@duckdb/node-api" ] ||
	(cd "$duckdir" && { [ -e package.json ] || npm init -y >/dev/null; } && npm install --silent @duckdb/node-api >/dev/null)
cat > "$tmp/q.mjs" <<'JS'
import { DuckDBInstance } from '@duckdb/node-api';
const [threads, cols, ...files] = process.argv.slice(2);
const db = await DuckDBInstance.create(':memory:', { threads });
const con = await db.connect();
const list = '[' + files.map(f => `'${f}'`).join(',') + ']';
const sums = cols.split(',').map(c => `sum("${c}")`).join(',');
await con.run(`SELECT count(*) FROM read_parquet(${list})`); // warm metadata and page cache
let best = 0, rows = 0, cpu = 0;
for (let i = 0; i < 3; i++) { // best of 3, as for ctrkit
	const c0 = process.cpuUsage();
	const t0 = process.hrtime.bigint();
	const r = await con.runAndReadAll(`SELECT count(*), ${sums} FROM read_parquet(${list})`);
	const s = Number(process.hrtime.bigint() - t0) / 1e9;
	const c = process.cpuUsage(c0);
	rows = Number(r.getRows()[0][0]);
	if (rows / s > best) { best = rows / s; cpu = (c.user + c.system) / 1e6; }
}
console.log(JSON.stringify({ rows, rows_per_second: best, cpu_seconds: cpu }));
JS
# node resolves the import from the script's folder
q="$duckdir/q-$$.mjs"
cp "$tmp/q.mjs" "$q"
trap 'rm -rf "$tmp" "$q"' EXIT
duck=$(cd "$duckdir" && node "$q" "$threads" "$cols" $files)
# As DuckDB above (one process: a warm-up query, then the best of 3): one
# process reads 4 epochs and the best epoch after the first counts.
o=$(/tmp/ctrkit-bench bench read "$list" "${key[@]}" --epochs 4 --num-workers "$threads" --batchsize 65536 --json | jq -r .best_epoch_samples_per_second)
# Issue #14's target: a fresh process per single epoch, best of 3 (its CPU
# seconds: the timed epoch's, every thread).
f=0 fc=0
for i in 1 2 3; do
	ours=$(/tmp/ctrkit-bench bench read "$list" "${key[@]}" --epochs 1 --num-workers "$threads" --batchsize 65536 --json)
	read -r rate cpu < <(echo "$ours" | jq -r '"\(.samples_per_second) \(.cpu_percent / 100 * .seconds)"')
	if awk -v a="$rate" -v b="$f" 'BEGIN { exit !(a > b) }'; then f=$rate fc=$cpu; fi
done
load1=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo '?')

d=$(echo "$duck" | jq .rows_per_second)
dc=$(echo "$duck" | jq .cpu_seconds)
printf '%-40s %14s %8s %8s\n' "reader (threads=$threads)" "rows/s" "ratio" "cpu s"
awk -v d="$d" -v dc="$dc" -v o="$o" -v f="$f" -v fc="$fc" 'BEGIN {
	printf "%-40s %14.0f %8s %8.3f\n", "duckdb sum(every column), best of 3", d, "1.00", dc;
	printf "%-40s %14.0f %8.3f %8s\n", "ctrkit reader, best epoch of 2-4", o, o/d, "";
	printf "%-40s %14.0f %8.3f %8.3f\n", "ctrkit, fresh process, one epoch", f, f/d, fc }'
echo "load average: $load0 before, $load1 after"


#!/usr/bin/env bash
# Compare ctrkit's Parquet reader with DuckDB on the same files and thread
# count, in one run: DuckDB sums every selected column; ctrkit decodes the same
# columns into batches (64-bit keys). DuckDB runs in one process: a warm-up,
# then the best of 3 queries. ctrkit is timed twice: the same way (one
# process, the best epoch after the first of 4), and as issue #14's target
# reads it, a fresh process for one epoch (best of 3 processes; the last
# line, its ratio the one to compare with 1.0).
#
#   bench/duckdb_compare.sh DIR/_file_list.txt [threads]
#
# DuckDB comes from npm (@duckdb/node-api), installed into a temporary folder.
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

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm init -y >/dev/null && npm install --silent @duckdb/node-api >/dev/null)
cat > "$tmp/q.mjs" <<'JS'
import { DuckDBInstance } from '@duckdb/node-api';
const [threads, cols, ...files] = process.argv.slice(2);
const db = await DuckDBInstance.create(':memory:', { threads });
const con = await db.connect();
const list = '[' + files.map(f => `'${f}'`).join(',') + ']';
const sums = cols.split(',').map(c => `sum("${c}")`).join(',');
await con.run(`SELECT count(*) FROM read_parquet(${list})`); // warm metadata and page cache
let best = 0, rows = 0;
for (let i = 0; i < 3; i++) { // best of 3, as for ctrkit
	const t0 = process.hrtime.bigint();
	const r = await con.runAndReadAll(`SELECT count(*), ${sums} FROM read_parquet(${list})`);
	const s = Number(process.hrtime.bigint() - t0) / 1e9;
	rows = Number(r.getRows()[0][0]);
	best = Math.max(best, rows / s);
}
console.log(JSON.stringify({ rows, rows_per_second: best }));
JS
duck=$(cd "$tmp" && node q.mjs "$threads" "$cols" $files)
# As DuckDB above (one process: a warm-up query, then the best of 3): one
# process reads 4 epochs and the best epoch after the first counts.
o=$(/tmp/ctrkit-bench bench read "$list" "${key[@]}" --epochs 4 --num-workers "$threads" --batchsize 65536 --json | jq -r .best_epoch_samples_per_second)
# For information: a fresh process per single epoch, best of 3.
f=0
for i in 1 2 3; do
	ours=$(/tmp/ctrkit-bench bench read "$list" "${key[@]}" --epochs 1 --num-workers "$threads" --batchsize 65536 --json)
	f=$(echo "$ours" | jq -r --argjson f "$f" '[.samples_per_second, $f] | max')
done

d=$(echo "$duck" | jq .rows_per_second)
printf '%-40s %14s %8s\n' "reader (threads=$threads)" "rows/s" "ratio"
awk -v d="$d" -v o="$o" -v f="$f" 'BEGIN {
	printf "%-40s %14.0f %8s\n", "duckdb sum(every column), best of 3", d, "1.00";
	printf "%-40s %14.0f %8.3f\n", "ctrkit reader, best epoch of 2-4", o, o/d;
	printf "%-40s %14.0f %8.3f\n", "ctrkit, fresh process, one epoch", f, f/d }'

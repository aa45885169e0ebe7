#!/usr/bin/env bash
# ctrkit on Parquet files written by pyarrow with its defaults (every column
# OPTIONAL though null-free, dictionary encoding with PLAIN fallback past
# 1 MiB, snappy, data page v1, one row group a file), the files NVTabular,
# pandas and most users' own scripts hand HugeCTR. In one run:
#   1. ctrkit gen writes 4 × 250 000 Criteo-shape rows (13 dense, 26 one-hot
#      slots of 100 000 keys); pyarrow rewrites them three ways: its defaults
#      (pa-default), uncompressed (pa-none), data page v2 (pa-v2); the
#      columns' repetition and encodings are printed;
#   2. `ctrkit convert --to norm` of each must be byte-identical to that of
#      ctrkit's own files (the same rows);
#   3. reader rates: ctrkit `bench read` against pyarrow.parquet
#      (ParquetDataset.read, use_threads) with the same thread count;
#   4. with a GPU (unless TRAIN=0): `ctrkit bench train --resident` of DLRM and WDL from
#      pa-default and from ctrkit's own files, the pipeline against resident batches.
# SHAPE=multihot writes the DLRM-DCNv2 shape instead (list columns, MLPerf
# hotness, 4 × 131 072 rows) and trains --model dcnv2.
#
#   bench/pyarrow_files.sh CTRKIT_BINARY WORKDIR [threads] [extra bench train flags]
# Needs python3 with pyarrow. Prints a table last.
set -euo pipefail
H=$(cd "$(dirname "$0")" && pwd) # pyarrow_read.py lies beside this script
B=$(realpath "${1:?usage: pyarrow_files.sh CTRKIT WORKDIR [threads] [bench train flags]}")
W=${2:?workdir}; T=${3:-16}; shift $(($# < 3 ? $# : 3))
mkdir -p "$W"; cd "$W"
# SHAPE=multihot: the DLRM-DCNv2 shape instead (4 × 131 072 rows, MLPerf
# hotness: list columns), trained as --model dcnv2.
SIZES=100000; ROWS=250000; MODELS="dlrm wdl"; GEN=()
if [ "${SHAPE:-onehot}" = multihot ]; then
	NNZ=3,2,1,2,6,1,1,1,1,7,3,8,1,6,9,5,1,1,1,12,100,27,10,3,1,1
	SIZES=2000000; ROWS=131072; MODELS=dcnv2; GEN=(--nnz-array "$NNZ")
fi
[ -f ck/file_list.txt ] || "$B" gen --format parquet --num-files 4 --eval-num-files 1 --num-samples-per-file "$ROWS" \
	--slot-size-array "$SIZES" "${GEN[@]}" --seed 1 --num-workers "$T" --label-mode uniform \
	--out-source ck/file_list.txt --out-eval-source ck/file_list_test.txt >/dev/null

python3 - <<'PY'
import os, json, shutil
import pyarrow as pa, pyarrow.parquet as pq
lst = "ck/file_list.txt"
names = open(lst).read().split()[1:]
variants = {"pa-default": {}, "pa-none": {"compression": "none"}, "pa-v2": {"data_page_version": "2.0"}}
for v, kw in variants.items():
    if os.path.exists(f"{v}/file_list.txt"):
        continue
    out = []
    for n in names:
        src = n if os.path.isabs(n) or os.path.exists(n) else os.path.join("ck", n)
        t = pq.read_table(src)
        def nullable(f):
            if pa.types.is_list(f.type) or pa.types.is_large_list(f.type):
                f = f.with_type(pa.list_(f.type.value_field.with_nullable(True)))
            return f.with_nullable(True)
        t = t.cast(pa.schema([nullable(f) for f in t.schema]))
        dst = os.path.join(v, os.path.relpath(src, "ck"))
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        pq.write_table(t, dst, **kw)
        out.append(os.path.abspath(dst))
        meta = os.path.join(os.path.dirname(src), "_metadata.json")
        if os.path.exists(meta):
            shutil.copy(meta, os.path.join(os.path.dirname(dst), "_metadata.json"))
    with open(f"{v}/file_list.txt", "w") as f:
        f.write(f"{len(out)}\n" + "".join(p + "\n" for p in out))
    md = pq.ParquetFile(out[0]).metadata
    rg = md.row_group(0)
    rep = {md.schema.column(i).max_definition_level for i in range(md.num_columns)}
    enc = {tuple(sorted(rg.column(i).encodings)) for i in range(md.num_columns)}
    print(f"{v}: pyarrow {pa.__version__}, {md.num_row_groups} row group(s), max definition levels {rep}, "
          f"codec {rg.column(0).compression}, encodings {enc}")
PY

# 2. The same rows, whoever wrote them.
"$B" convert ck/file_list.txt conv-ck/file_list.txt --to norm --slot-offsets --slot-size-array "$SIZES" --force >/dev/null
for v in pa-default pa-none pa-v2; do
	same=yes
	"$B" convert "$v/file_list.txt" "conv-$v/file_list.txt" --to norm --slot-offsets --slot-size-array "$SIZES" --force >/dev/null || same="no (convert failed)"
	for f in conv-ck/*.data; do cmp -s "$f" "conv-$v/$(basename "$f")" || same=no; done
	echo "convert --to norm of $v: identical to that of ctrkit's own files: $same"
done

pyarrow() { python3 "$H/pyarrow_read.py" "$1" "$T"; } # list → rows/s (best of 3), bytes
ours() { "$B" bench read "$@" --json | python3 -c "import json,sys; r=json.load(sys.stdin); print(f\"{r['samples_per_second']:.0f}\")"; }

rows=()
for v in ck pa-default pa-none pa-v2; do
	cat "$v"/*/*.parquet "$v"/*.parquet > /dev/null 2>&1 || true
	p=$(pyarrow "$v/file_list.txt" | cut -d" " -f1)
	o=$(ours "$v/file_list.txt" --i64-input-key --num-workers "$T" --epochs 3 "${GEN[@]}")
	rows+=("$v $p $o")
done

trained=()
if [ "${TRAIN:-1}" = 1 ] && { [ -e /dev/nvidia0 ] || command -v nvidia-smi >/dev/null 2>&1; }; then
	for v in pa-default ck; do
		for m in $MODELS; do
			j=$("$B" bench train "$v/file_list.txt" --model "$m" --slot-size-array "$SIZES" "${GEN[@]}" --device gpu --resident --warmup 20 "$@" --json)
			trained+=("$m $v $(echo "$j" | python3 -c "import json,sys; r=json.load(sys.stdin); print(r['pipeline']['SamplesPerSec'], (r.get('resident') or {}).get('SamplesPerSec', 0))")")
			echo "$j" > "train-$m-$v.json"
		done
	done
fi

echo
printf '%-12s %16s %16s %8s\n' "files" "pyarrow rows/s" "ctrkit rows/s" "ratio"
for r in "${rows[@]}"; do
	set -- $r
	printf '%-12s %16s %16s %8.2f\n' "$1" "$2" "$3" "$(awk -v a="$3" -v b="$2" 'BEGIN{print a/b}')"
done
for r in "${trained[@]}"; do
	set -- $r
	printf 'bench train %s from %s: pipeline %.0f, resident %.0f samples/s (pipeline cost %.1f%%)\n' "$1" "$2" "$3" "$4" \
		"$(awk -v a="$3" -v b="$4" 'BEGIN{print (b > 0) ? 100 * (1 - a / b) : 0}')"
done

"""Time pyarrow reading a Parquet file list, as the bench scripts compare.

    python3 bench/pyarrow_read.py FILE_LIST THREADS

Reads the files (a HugeCTR file list: a count, then paths, relative to the
list's folder or the working directory) with ParquetDataset.read on THREADS
threads, three times, and prints the best rate in rows per second and the
table's bytes. Standard library and pyarrow only.
"""
import os
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq


def main():
    lst, t = sys.argv[1], int(sys.argv[2])
    pa.set_cpu_count(t)
    pa.set_io_thread_count(t)
    d = os.path.dirname(lst)
    with open(lst) as f:
        words = f.read().split()
    names = words[1:1 + int(words[0])]
    files = [n if os.path.isabs(n) or os.path.exists(n) else os.path.join(d, n) for n in names]
    best, tab = 0.0, None
    for _ in range(3):
        t0 = time.perf_counter()
        tab = pq.ParquetDataset(files).read(use_threads=True)
        best = max(best, tab.num_rows / (time.perf_counter() - t0))
    print(f"{best:.0f} {tab.nbytes}")


if __name__ == "__main__":
    main()

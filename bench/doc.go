// Package bench runs end-to-end throughput workloads: reading a dataset
// through any formats.Reader for a duration or a number of epochs, and
// reporting samples/s, file bytes/s, batch latency percentiles and CPU use.
// The scripts beside it (fio_compare.sh, duckdb_compare.sh) run ctrkit and a
// reference tool on the same files in one run and print the ratio.
package bench

// Package atomicfile makes outputs appear only complete: a File is written
// under a temporary name (".<name>.tmp-<random>") and renamed to its final
// name by Commit; a Stage collects the files of one output (data files,
// then their index) and makes them visible as a unit, swapping a whole
// output directory atomically where the kernel allows it; SyncDir makes
// names survive a crash. Every writer of a dataset, a snapshot or a report
// writes through it.
//
// It imports nothing of ctrkit (what the file lists of an existing output
// name comes in through StageOptions.Listed); formats, its format packages,
// dataset, datagen and the trainer import it. It is internal: the module's
// public writers take a Creator, whose nil value means Direct.
package atomicfile

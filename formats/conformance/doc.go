// Package conformance holds the cross-format conformance test: seeded random
// datasets written in every format that can hold them and read back through
// every reader must give identical samples. It has no code of its own.
package conformance

//go:build !linux

package parquet

import (
	"errors"
	"os"
)

// mapFile is not used outside Linux: column chunks are read through
// arrow-go's page reader.
func mapFile(*os.File, int64) ([]byte, error) { return nil, errors.ErrUnsupported }

func unmapFile([]byte) {}

func populate([]byte, int64, int64) {}

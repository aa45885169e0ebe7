package formats

import (
	"errors"
	"strings"
	"testing"
)

// TestNewBatchRefusesWhatMemoryCannotHold: a schema read from a file (a
// Norm header's dense_dim 2^20) with a large batch size is refused with the
// size and what to lower, before anything is allocated (bench read and
// convert asked for 256 GiB).
func TestNewBatchRefusesWhatMemoryCannotHold(t *testing.T) {
	s := NewSchema(1, 1<<20, []int{1}, nil, KeyU32)
	_, err := NewBatch(&s, 1<<20, nil) // 4 TiB
	if !errors.Is(err, ErrMemory) || !strings.Contains(err.Error(), "--batchsize") || !strings.Contains(err.Error(), "4.0 TiB") {
		t.Fatalf("NewBatch = %v, want ErrMemory naming 4.0 TiB and --batchsize", err)
	}
	if _, err := NewBatch(&s, 4, nil); err != nil {
		t.Fatalf("NewBatch of 4 samples (16 MiB): %v", err)
	}
	big := NewSchema(1, 1, make([]int, MaxDim+1), nil, KeyU32)
	if err := big.Validate(); err == nil {
		t.Errorf("a schema of %d slots validates", MaxDim+1)
	}
}

package graph

import (
	"errors"
	"strings"
	"testing"
)

// TestMessagesForUsers: errors carry no Go package prefix (the sentinels
// still match with errors.Is) and the summary names the solver's keys.
func TestMessagesForUsers(t *testing.T) {
	_, err := Read(strings.NewReader(`{"solver": {`), "bad.json")
	if !errors.Is(err, ErrSyntax) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("syntax error %v does not match ErrSyntax and ErrInvalid", err)
	}
	_, err2 := Reference("nosuch", RefOptions{DenseDim: 1, SlotSizes: []int64{2, 2}})
	for _, e := range []error{err, err2, ErrInvalid, ErrValue, ErrUnsupported} {
		if e == nil || strings.Contains(e.Error(), "ctrkit/") {
			t.Errorf("error %v: want a message without a package prefix", e)
		}
	}
	cfg, err := Reference("wdl", RefOptions{DenseDim: 4, SlotSizes: []int64{4, 4, 4}, VecSize: 4, Width: 1.0 / 64})
	if err != nil {
		t.Fatal(err)
	}
	s := DefaultSolver()
	s.NumEpochs = 1
	cfg.Solver = s
	var sb strings.Builder
	if err := Summary(&sb, cfg); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sb.String(), "num_epochs 1,") || strings.Contains(sb.String(), "1 epochs") {
		t.Errorf("summary:\n%s", sb.String())
	}
}

package bench

import (
	"math"
	"strings"
	"testing"

	"github.com/ctrkit/ctrkit/trainer/model"
)

// TestFiniteLoss: a diverged run is an error, not a samples/s figure.
func TestFiniteLoss(t *testing.T) {
	if err := finiteLoss("pipeline", model.Throughput{LossFirst: 0.69, LossLast: 0.5}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []model.Throughput{{LossFirst: 0.69, LossLast: math.NaN()}, {LossFirst: math.Inf(1), LossLast: 0.5}} {
		if err := finiteLoss("pipeline", bad); err == nil || !strings.Contains(err.Error(), "diverged") {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

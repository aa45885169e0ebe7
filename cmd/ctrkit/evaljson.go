package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"

	"github.com/ctrkit/ctrkit/trainer/model"
)

// evaluateJSON is evaluate --json: RunEvaluate, its result as one JSON
// object on w.
func evaluateJSON(w io.Writer, j model.Job) error {
	res, err := model.RunEvaluate(j, io.Discard)
	if err != nil {
		return err
	}
	return writeEvalJSON(w, res)
}

// writeEvalJSON writes evaluate --json's object; a metric that is not a
// number (the AUC of data with one class) is null.
func writeEvalJSON(w io.Writer, r model.EvalResult) error {
	num := func(v float64) *float64 {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return &v
	}
	b, err := json.Marshal(struct {
		AUC     *float64 `json:"auc"`
		Loss    *float64 `json:"loss"`
		HitRate *float64 `json:"hit_rate"`
		Samples int      `json:"samples"`
		Batches int      `json:"batches"`
		// Tasks: per-task AUC and loss of a multi-task model.
		Tasks []model.TaskPoint `json:"tasks,omitempty"`
	}{num(r.AUC), num(r.Loss), num(r.HitRate), r.Samples, r.Batches, r.TaskPoints()})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

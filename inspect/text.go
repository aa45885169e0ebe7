package inspect

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText writes the report as aligned text tables: labels, dense
// columns, slots (size, keys, distinct keys, key range, nnz range and mean,
// α), and each slot's nnz histogram.
func (r *Report) WriteText(w io.Writer) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "samples    %d\n", r.Samples)
	tw := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', tabwriter.AlignRight)
	if len(r.Labels) > 0 {
		fmt.Fprintf(&sb, "\nlabels\n")
		fmt.Fprintln(tw, "column\tmin\tmean\tmax\tnon-finite\t")
		for i, v := range r.Labels {
			fmt.Fprintf(tw, "%d\t%.6g\t%.6g\t%.6g\t%d\t\n", i, v.Min, v.Mean, v.Max, v.NonFinite)
		}
		tw.Flush()
		fmt.Fprintf(&sb, "label 0 histogram on [0,1] (%d bins): %s; outside [0,1]: %d\n", len(r.LabelHist), joinInts(r.LabelHist), r.LabelOutside)
	}
	if len(r.Dense) > 0 {
		fmt.Fprintf(&sb, "\ndense\n")
		fmt.Fprintln(tw, "column\tmin\tmean\tmax\tnon-finite\t")
		for i, v := range r.Dense {
			fmt.Fprintf(tw, "%d\t%.6g\t%.6g\t%.6g\t%d\t\n", i, v.Min, v.Mean, v.Max, v.NonFinite)
		}
		tw.Flush()
	}
	if len(r.Slots) > 0 {
		fmt.Fprintf(&sb, "\nslots\n")
		fmt.Fprintln(tw, "slot\tname\tsize\tkeys\tdistinct\tmin key\tmax key\tnnz min\tnnz max\tnnz mean\talpha\tfit ranks\t")
		for i, s := range r.Slots {
			size := "-"
			if s.Size > 0 {
				size = fmt.Sprint(s.Size)
			}
			distinct := fmt.Sprint(s.Distinct)
			if !s.Exact {
				distinct = "≈" + distinct
			}
			alpha, ranks := "-", "-"
			if s.Alpha != nil {
				alpha = fmt.Sprintf("%.4f", *s.Alpha)
				ranks = fmt.Sprintf("%d..%d of %d", s.Fit.RMin, s.Fit.RMax, s.Fit.M)
			}
			mean := 0.0
			if r.Samples > 0 {
				mean = float64(s.Keys) / float64(r.Samples)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%d\t%d\t%d\t%d\t%.3f\t%s\t%s\t\n", i, s.Name, size, s.Keys, distinct, s.MinKey, s.MaxKey, s.NNZMin, s.NNZMax, mean, alpha, ranks)
		}
		tw.Flush()
		fmt.Fprintf(&sb, "distinct keys: exact (≈: more than the exact limit, HyperLogLog estimate; α then fitted on the exactly counted head)\n")
		fmt.Fprintf(&sb, "\nnnz histograms (nnz:samples; %d+ pooled)\n", maxNNZBin)
		for i, s := range r.Slots {
			fmt.Fprintf(&sb, "slot %d: %s\n", i, sparseHist(s.NNZHist))
		}
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

func joinInts(v []int64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, " ")
}

func sparseHist(h []int64) string {
	var s []string
	for i, n := range h {
		if n > 0 {
			s = append(s, fmt.Sprintf("%d:%d", i, n))
		}
	}
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, " ")
}

// Package progress draws progress bars for long commands on a terminal and
// stays silent when the output is not one (pipes, CI logs, tests).
package progress

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Bar is a progress bar, or a no-op when its writer is not a terminal. It is
// safe for concurrent use. The zero value and a nil *Bar are no-ops.
type Bar struct {
	pb    *progressbar.ProgressBar
	desc  string
	total int64
	done  int64
	start time.Time
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// New returns a bar counting to total (-1 for unknown) in the given unit
// ("samples", "bytes") on w, or a no-op bar when w is not a terminal. A bar
// with a known total shows the time left (ETA) in its description.
func New(w io.Writer, total int64, desc, unit string) *Bar {
	if !IsTerminal(w) {
		return &Bar{}
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionShowCount(),
		progressbar.OptionSetItsString(unit),
		progressbar.OptionShowIts(),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionFullWidth(),
		// [elapsed:left] when the total is unknown; with a total the
		// description says the ETA (ETA, tested).
		progressbar.OptionSetPredictTime(total <= 0),
	}
	if unit == "bytes" {
		opts = append(opts, progressbar.OptionShowBytes(true))
	}
	return &Bar{pb: progressbar.NewOptions64(total, opts...), desc: desc, total: total, start: time.Now()}
}

// Add advances the bar by n.
func (b *Bar) Add(n int64) {
	if b == nil || b.pb == nil {
		return
	}
	b.done += n
	if b.total > 0 {
		b.pb.Describe(b.desc + ", ETA " + FormatETA(ETA(b.done, b.total, time.Since(b.start))))
	}
	b.pb.Add64(n)
}

// Finish completes and clears the bar.
func (b *Bar) Finish() {
	if b != nil && b.pb != nil {
		b.pb.Finish()
	}
}

// Writer returns w wrapped to clear the bar before each write, so that log
// lines written to the same terminal are not mixed into the bar (the next
// Add draws it again below them). A no-op bar returns w.
func (b *Bar) Writer(w io.Writer) io.Writer {
	if b == nil || b.pb == nil {
		return w
	}
	return clearWriter{b, w}
}

type clearWriter struct {
	b *Bar
	w io.Writer
}

func (c clearWriter) Write(p []byte) (int, error) {
	c.b.pb.Clear()
	return c.w.Write(p)
}

// ETA is the time left to reach total at the mean rate so far:
// elapsed × (total − done) / done. It is 0 once done ≥ total and -1 when
// unknown (nothing done yet, or no total).
func ETA(done, total int64, elapsed time.Duration) time.Duration {
	switch {
	case total <= 0 || done <= 0:
		return -1
	case done >= total:
		return 0
	}
	return time.Duration(float64(elapsed) * float64(total-done) / float64(done))
}

// FormatETA writes d as "1h02m03s", "4m05s" or "6s", rounded to the second;
// "?" when d < 0 (unknown).
func FormatETA(d time.Duration) string {
	if d < 0 {
		return "?"
	}
	s := int64(d.Round(time.Second) / time.Second)
	switch {
	case s >= 3600:
		return fmt.Sprintf("%dh%02dm%02ds", s/3600, s/60%60, s%60)
	case s >= 60:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	return fmt.Sprintf("%ds", s)
}

// Package progress draws progress bars for long commands on a terminal and
// stays silent when the output is not one (pipes, CI logs, tests).
package progress

import (
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Bar is a progress bar, or a no-op when its writer is not a terminal. It is
// safe for concurrent use. The zero value and a nil *Bar are no-ops.
type Bar struct {
	pb *progressbar.ProgressBar
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// New returns a bar counting to total (-1 for unknown) in the given unit
// ("samples", "bytes") on w, or a no-op bar when w is not a terminal.
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
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionFullWidth(),
	}
	if unit == "bytes" {
		opts = append(opts, progressbar.OptionShowBytes(true))
	}
	return &Bar{pb: progressbar.NewOptions64(total, opts...)}
}

// Add advances the bar by n.
func (b *Bar) Add(n int64) {
	if b != nil && b.pb != nil {
		b.pb.Add64(n)
	}
}

// Finish completes and clears the bar.
func (b *Bar) Finish() {
	if b != nil && b.pb != nil {
		b.pb.Finish()
	}
}

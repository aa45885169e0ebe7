package datagen

import (
	"fmt"
	"strings"
)

// ParamError reports an invalid parameter. Param is HugeCTR's parameter
// name (snake case, "slot_size_array"); the command line turns it into
// its flag (--slot-size-array).
type ParamError struct {
	Param string
	Msg   string
}

func (e *ParamError) Error() string { return "ctrkit/datagen: " + e.Param + ": " + e.Msg }

// Flag returns the command-line flag of the parameter ("--slot-size-array").
func (e *ParamError) Flag() string { return "--" + strings.ReplaceAll(e.Param, "_", "-") }

func perr(param, format string, args ...any) error {
	return &ParamError{Param: param, Msg: fmt.Sprintf(format, args...)}
}

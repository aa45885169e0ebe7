//go:build !linux

package asyncio

import "errors"

var errNoUring = errors.New("io_uring unavailable: not Linux")

func (r *Reader) startURing(File) (func(t *ioThread), error) { return nil, errNoUring }

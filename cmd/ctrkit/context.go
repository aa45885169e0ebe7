package main

import (
	"context"

	"github.com/ctrkit/ctrkit/formats"
)

// withContext makes r observe ctx: once ctx is cancelled (SIGINT, SIGTERM),
// Read and Next return its error instead of the next batch. A Lender stays
// one.
func withContext(ctx context.Context, r formats.Reader) formats.Reader {
	if l, ok := r.(lendingReader); ok {
		return &ctxLender{ctxReader{r, ctx}, l}
	}
	return &ctxReader{r, ctx}
}

type lendingReader interface {
	formats.Reader
	formats.Lender
}

type ctxReader struct {
	formats.Reader
	ctx context.Context
}

func (r *ctxReader) Read(b *formats.Batch) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.Reader.Read(b)
}

type ctxLender struct {
	ctxReader
	l formats.Lender
}

func (r *ctxLender) Next() (*formats.Batch, error) {
	if err := r.ctx.Err(); err != nil {
		return nil, err
	}
	return r.l.Next()
}

// runCancellable runs f, which does not observe ctx itself, and returns
// ctx's error as soon as ctx is cancelled (f is then abandoned: the
// process exits); f must write no output.
func runCancellable[T any](ctx context.Context, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

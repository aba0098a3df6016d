// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package controller

import (
	"context"
	"errors"

	"github.com/nodepulse/nodepulse/services/nodestore"
)

// opResult is the outcome of one op of a batch: the revision it was
// committed at, or why it was not.
type opResult struct {
	rev int64
	err error
}

// chunkRecorder remembers what each Apply that nodestore.ApplyChunked made
// returned, so the caller learns every chunk's revision and which chunk
// failed.
type chunkRecorder struct {
	nodestore.Writer
	calls []chunkCall
}

type chunkCall struct {
	n   int
	rev int64
	err error
}

func (r *chunkRecorder) Apply(ctx context.Context, fence *nodestore.Fence, ops ...nodestore.Op) (int64, error) {
	rev, err := r.Writer.Apply(ctx, fence, ops...)
	r.calls = append(r.calls, chunkCall{n: len(ops), rev: rev, err: err})
	return rev, err
}

// applyIndependent commits ops on different objects in fenced Txns of up to
// MaxOps ops (nodestore.ApplyChunked). The ops are independent but each may
// carry its own precondition (IfModRevision, IfAbsent), and a Txn is all or
// nothing: a chunk that fails with ErrConflict is therefore retried op by op,
// so one conflicting object costs only its own write. ErrFenced, or any other
// error (the store failing), ends the batch at once: it is returned, and every
// op not committed gets it as its result.
func applyIndependent(ctx context.Context, w nodestore.Writer, fence *nodestore.Fence, ops []nodestore.Op) ([]opResult, error) {
	res := make([]opResult, len(ops))
	fail := func(from int, err error) ([]opResult, error) {
		for j := from; j < len(ops); j++ {
			res[j].err = err
		}
		return res, err
	}
	rec := &chunkRecorder{Writer: w}
	i := 0
	for i < len(ops) {
		rec.calls = rec.calls[:0]
		_, err := nodestore.ApplyChunked(ctx, rec, fence, ops[i:])
		for _, call := range rec.calls {
			if call.err != nil {
				break
			}
			for j := i; j < i+call.n; j++ {
				res[j].rev = call.rev
			}
			i += call.n
		}
		if err == nil {
			return res, nil
		}
		if !errors.Is(err, nodestore.ErrConflict) || len(rec.calls) == 0 {
			return fail(i, err)
		}
		failed := rec.calls[len(rec.calls)-1].n
		if failed == 1 { // that op is the conflict: no need to ask again
			res[i].err = err
			i++
			continue
		}
		for j := i; j < i+failed; j++ {
			rev, err := w.Apply(ctx, fence, ops[j])
			res[j] = opResult{rev: rev, err: err}
			if err != nil && !errors.Is(err, nodestore.ErrConflict) {
				return fail(j, err)
			}
		}
		i += failed
	}
	return res, nil
}

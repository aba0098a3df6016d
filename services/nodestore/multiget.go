// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package nodestore

import (
	"context"
	"errors"
)

// Ref names one object to read.
type Ref struct {
	Kind Kind
	Name string
}

// MultiGetter is implemented by stores that read several keys in one round
// trip (etcd: one Txn of range ops). Registration storms after a collector
// restart read three keys per node; batching them keeps etcd's request rate
// flat.
type MultiGetter interface {
	// GetMany returns one result per ref, in order, read at one revision.
	// A missing object has Found false. Keep len(refs) within MaxOps.
	GetMany(ctx context.Context, refs []Ref) ([]GetResult, error)
}

// GetResult is one answer of GetMany.
type GetResult struct {
	Object Object
	Found  bool
}

// GetMany reads refs with r's MultiGetter when it has one, in chunks of
// maxOps, and with one Get per ref otherwise.
func GetMany(ctx context.Context, r Reader, maxOps int, refs []Ref) ([]GetResult, error) {
	out := make([]GetResult, 0, len(refs))
	if mg, ok := r.(MultiGetter); ok && maxOps > 0 {
		for len(refs) > 0 {
			n := min(maxOps, len(refs))
			res, err := mg.GetMany(ctx, refs[:n])
			if err != nil {
				return nil, err
			}
			out = append(out, res...)
			refs = refs[n:]
		}
		return out, nil
	}
	for _, ref := range refs {
		o, err := r.Get(ctx, ref.Kind, ref.Name)
		switch {
		case errors.Is(err, ErrNotFound):
			out = append(out, GetResult{})
		case err != nil:
			return nil, err
		default:
			out = append(out, GetResult{Object: o, Found: true})
		}
	}
	return out, nil
}

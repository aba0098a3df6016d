// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package etcdstore

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodepulse/nodepulse/services/nodestore"
)

var _ nodestore.MultiGetter = (*Store)(nil)

// GetMany implements nodestore.MultiGetter as one Txn of Gets: one round
// trip and one revision for every ref.
func (s *Store) GetMany(ctx context.Context, refs []nodestore.Ref) ([]nodestore.GetResult, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	if len(refs) > s.cfg.MaxTxnOps {
		return nil, fmt.Errorf("get many: %d reads exceed etcd.max-txn-ops %d", len(refs), s.cfg.MaxTxnOps)
	}
	ops := make([]clientv3.Op, len(refs))
	for i, r := range refs {
		ops[i] = clientv3.OpGet(s.key(r.Kind, r.Name))
	}
	ctx, cancel := s.reqCtx(ctx)
	defer cancel()
	resp, err := s.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, fmt.Errorf("get %d objects: %w", len(refs), err)
	}
	out := make([]nodestore.GetResult, len(refs))
	for i, r := range resp.Responses {
		rr := r.GetResponseRange()
		if rr == nil || len(rr.Kvs) == 0 {
			continue
		}
		kv := rr.Kvs[0]
		o, err := s.decode(string(kv.Key), kv.Value, kv.CreateRevision, kv.ModRevision)
		if err != nil {
			return nil, err
		}
		out[i] = nodestore.GetResult{Object: o, Found: true}
	}
	return out, nil
}

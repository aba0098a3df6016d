// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package etcdstore

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/nodepulse/nodepulse/services/nodestore"
)

var _ nodestore.EachApplier = (*Store)(nil)

// ApplyEach implements nodestore.EachApplier as one Txn whose ops are
// nested Txns, "if the key is at its revision, put, else get": one round
// trip and one revision, and a stale revision fails only its own op.
func (s *Store) ApplyEach(ctx context.Context, ops []nodestore.Op) ([]nodestore.EachResult, int64, error) {
	if err := nodestore.CheckEach(ops, s.cfg.MaxTxnOps); err != nil {
		return nil, 0, err
	}
	nested := make([]clientv3.Op, len(ops))
	for i, op := range ops {
		key := s.key(op.Kind, op.Name)
		v, err := s.codec.encode(op.Kind, op.Value)
		if err != nil {
			return nil, 0, fmt.Errorf("encode %s: %w", key, err)
		}
		var cmps []clientv3.Cmp
		if op.IfAbsent {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
		}
		if op.IfModRevision > 0 {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", op.IfModRevision))
		}
		nested[i] = clientv3.OpTxn(cmps, []clientv3.Op{clientv3.OpPut(key, v)}, []clientv3.Op{clientv3.OpGet(key)})
	}
	ctx, cancel := s.reqCtx(ctx)
	defer cancel()
	resp, err := s.cli.Txn(ctx).Then(nested...).Commit()
	if err != nil {
		return nil, 0, fmt.Errorf("txn of %d conditional puts: %w", len(ops), err)
	}
	out := make([]nodestore.EachResult, len(ops))
	for i, r := range resp.Responses {
		t := r.GetResponseTxn()
		if t == nil {
			return nil, 0, fmt.Errorf("txn of %d conditional puts: response %d is not a txn", len(ops), i)
		}
		if t.Succeeded {
			out[i].Applied = true
			continue
		}
		if len(t.Responses) == 0 {
			continue
		}
		rr := t.Responses[0].GetResponseRange()
		if rr == nil || len(rr.Kvs) == 0 {
			continue // absent
		}
		kv := rr.Kvs[0]
		o, err := s.decode(string(kv.Key), kv.Value, kv.CreateRevision, kv.ModRevision)
		if err != nil {
			return nil, 0, err
		}
		out[i].Current = nodestore.GetResult{Object: o, Found: true}
	}
	return out, resp.Header.Revision, nil
}

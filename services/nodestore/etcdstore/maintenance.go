// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package etcdstore

import (
	"context"
	"fmt"

	"github.com/nodepulse/nodepulse/services/nodestore"
)

// The store is maintained through nodestore.Maintenance.
var _ nodestore.Maintenance = (*Store)(nil)

// Members lists the cluster's members that advertise a client URL (a
// member added but not started yet has none and is left out).
func (s *Store) Members(ctx context.Context) ([]nodestore.Member, error) {
	ctx, cancel := s.reqCtx(ctx)
	defer cancel()
	resp, err := s.ctl.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("etcd member list: %w", err)
	}
	out := make([]nodestore.Member, 0, len(resp.Members))
	for _, m := range resp.Members {
		if len(m.ClientURLs) == 0 {
			continue
		}
		out = append(out, nodestore.Member{ID: m.ID, Name: m.Name, Endpoint: m.ClientURLs[0]})
	}
	return out, nil
}

// MemberStatus asks the member at endpoint about its database.
func (s *Store) MemberStatus(ctx context.Context, endpoint string) (nodestore.MemberStatus, error) {
	ctx, cancel := s.reqCtx(ctx)
	defer cancel()
	resp, err := s.ctl.Status(ctx, endpoint)
	if err != nil {
		return nodestore.MemberStatus{}, fmt.Errorf("etcd status of %s: %w", endpoint, err)
	}
	return nodestore.MemberStatus{Leader: resp.Leader, DBSize: resp.DbSize, DBSizeInUse: resp.DbSizeInUse}, nil
}

// Defragment rewrites the bbolt file of the member at endpoint without its
// empty space. The member serves no reads or writes until it is done
// (about a second per 100 MB); the caller's ctx bounds the wait, not the
// store's request timeout, which a large member would exceed.
func (s *Store) Defragment(ctx context.Context, endpoint string) error {
	if _, err := s.ctl.Defragment(ctx, endpoint); err != nil {
		return fmt.Errorf("etcd defragment %s: %w", endpoint, err)
	}
	return nil
}

// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package main

import (
	"context"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/nodepulse/nodepulse/tests/etcdtest"
)

// The history census counts every revision a stopped member's file holds,
// per kind: overwritten values and deletes included, keys outside the
// prefix apart.
func TestHistoryCountsEveryRevision(t *testing.T) {
	c := etcdtest.Start(t)
	ctx := context.Background()
	for _, kv := range [][2]string{
		{"/np/leases/a", "1"}, {"/np/leases/a", "22"}, {"/np/leases/b", "333"},
		{"/np/status/a", "4444"}, {"/registry/x", "55555"},
	} {
		if _, err := c.Client.Put(ctx, kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Client.Delete(ctx, "/np/leases/b"); err != nil {
		t.Fatal(err)
	}
	c.Stop()

	db, err := bolt.Open(c.DBFile(), 0o400, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	kinds, _, err := tallyHistory(db, "/np/")
	if err != nil {
		t.Fatal(err)
	}
	for kind, want := range map[string]hist{
		"leases":           {puts: 3, deletes: 1, valueBytes: 1 + 2 + 3},
		"status":           {puts: 1, valueBytes: 4},
		"(other prefixes)": {puts: 1, valueBytes: 5},
	} {
		got := kinds[kind]
		if got == nil || got.puts != want.puts || got.deletes != want.deletes || got.valueBytes != want.valueBytes {
			t.Errorf("%s: %+v, want puts %d, deletes %d, value bytes %d", kind, got, want.puts, want.deletes, want.valueBytes)
		}
	}
	if len(kinds) != 3 {
		t.Errorf("kinds %v, want leases, status and other prefixes", kinds)
	}
}

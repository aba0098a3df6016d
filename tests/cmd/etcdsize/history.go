// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// revisionKeyLen is the length of a revision key in etcd's "key" bucket:
// 8 bytes main revision, '_', 8 bytes sub revision; a tombstone (a
// delete) appends a 't'.
const revisionKeyLen = 17

// history tallies every revision a member's bbolt file holds, per kind
// under prefix: what the run wrote and compaction has not discarded yet,
// puts and deletes apart. A live census (census) sees only the newest
// value of each key; this is where the history between compactions, which
// the database size also counts, becomes visible. The file must not be
// open in a running member (bolt locks it): stop the member, or copy the
// file (bench --keep-etcd-data keeps the benchmark's).
func history(path, prefix string) error {
	if _, err := os.Stat(path); err != nil {
		return err
	}
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: 2 * time.Second})
	if err != nil {
		return fmt.Errorf("open %s (a running member holds its lock): %w", path, err)
	}
	defer func() { _ = db.Close() }()
	kinds, pages, err := tallyHistory(db, prefix)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	printHistory(kinds)
	fi, _ := os.Stat(path)
	fmt.Printf("records MB = revision key + etcd's record (key, value, revisions, version, lease); the key bucket's pages: %.1f MiB; file: %.1f MiB\n",
		float64(pages)/(1<<20), float64(fi.Size())/(1<<20))
	return nil
}

// hist is what one kind's revisions hold.
type hist struct{ puts, deletes, keyBytes, valueBytes, recordBytes int64 }

// tallyHistory counts the revisions in etcd's key bucket per kind, and
// returns the bytes of the bucket's pages.
func tallyHistory(db *bolt.DB, prefix string) (map[string]*hist, int64, error) {
	kinds := map[string]*hist{}
	var pages int64
	err := db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("key"))
		if b == nil {
			return errors.New("no key bucket: not an etcd v3 database")
		}
		st := b.Stats()
		pages = int64(st.LeafAlloc + st.BranchAlloc)
		return b.ForEach(func(k, v []byte) error {
			var kv mvccpb.KeyValue
			if err := proto.Unmarshal(v, &kv); err != nil {
				return fmt.Errorf("revision %x: %w", k, err)
			}
			kind := "(other prefixes)" // the bench's baseline writes /registry/...
			if rest, ok := strings.CutPrefix(string(kv.Key), prefix); ok {
				kind, _, _ = strings.Cut(rest, "/")
			}
			h := kinds[kind]
			if h == nil {
				h = &hist{}
				kinds[kind] = h
			}
			if len(k) > revisionKeyLen {
				h.deletes++
			} else {
				h.puts++
			}
			h.keyBytes += int64(len(kv.Key))
			h.valueBytes += int64(len(kv.Value))
			h.recordBytes += int64(len(k) + len(v))
			return nil
		})
	})
	return kinds, pages, err
}

func printHistory(kinds map[string]*hist) {
	names := slices.Sorted(maps.Keys(kinds))
	var sum hist
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "kind\tputs\tdeletes\tkey B\tvalue B\tavg value B\trecords MB\t\n")
	row := func(name string, h *hist) {
		avg := int64(0)
		if h.puts > 0 {
			avg = h.valueBytes / h.puts
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%.2f\t\n", name, h.puts, h.deletes, h.keyBytes, h.valueBytes, avg, float64(h.recordBytes)/1e6)
	}
	for _, n := range names {
		h := kinds[n]
		row(n, h)
		sum.puts += h.puts
		sum.deletes += h.deletes
		sum.keyBytes += h.keyBytes
		sum.valueBytes += h.valueBytes
		sum.recordBytes += h.recordBytes
	}
	row("total", &sum)
	_ = w.Flush()
}

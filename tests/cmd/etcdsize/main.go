// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Command etcdsize reports what a nodepulse etcd holds: per kind (the first
// key segment under --prefix) the number of keys and the bytes of keys and
// values, against the member's database size (the bbolt file, which also
// holds every revision not yet compacted). With --compact it then compacts
// the history up to the current revision, with --defrag it defragments the
// member, and reports the sizes again, which separates live data from
// history and from free pages:
//
//	go run ./tests/cmd/etcdsize --endpoints 127.0.0.1:2379 [--compact] [--defrag]
//
// Values may be plain protobuf or compressed by etcdstore (a leading 0x00
// byte); both are decoded. The "compressed" column counts values stored
// compressed; "codec B" is what this build's etcdstore codec would store for
// every value of the kind (so a run with --etcd.compress-values=false shows
// before and after at once). --get KEY prints one decoded value as JSON, for
// people who would otherwise pipe etcdctl into buf (values may be
// compressed).
//
// It reads every value under the prefix (paged at one revision), so run it
// against a test or benchmark member, or expect one full read of the fleet.
//
// --db-file reads a stopped member's bbolt file instead (member/snap/db;
// bench --keep-etcd-data keeps the benchmark's) and counts every revision
// it holds per kind, puts and deletes: the history between compactions,
// which the database size counts and a live read cannot see:
//
//	go run ./tests/cmd/etcdsize --db-file .run/bench/<time>/etcd-data/member/snap/db
package main

import (
	"bytes"
	"compress/flate"
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/nodestore/etcdstore"
)

func main() {
	endpoints := flag.String("endpoints", "127.0.0.1:2379", "comma-separated etcd client endpoints")
	prefix := flag.String("prefix", "/nodepulse/", "key prefix to account for")
	compact := flag.Bool("compact", false, "after the first report, compact the history up to the current revision and report again")
	defrag := flag.Bool("defrag", false, "after that, defragment the first endpoint's member and report again")
	flag.BoolVar(&show, "show", false, "print the first value of each kind as JSON")
	flag.BoolVar(&deflate, "deflate", false, "also estimate each kind's value bytes if every value were DEFLATE-compressed with a dictionary of sample values of its kind")
	get := flag.String("get", "", "print the value of this one key (full key, with the prefix) as JSON and exit")
	dbFile := flag.String("db-file", "", "count every revision in this bbolt file (a stopped member's member/snap/db) per kind, instead of reading a live member")
	flag.StringVar(&dumpDir, "dump", "", "write every value as one line of JSON per object to <dir>/<kind>.jsonl (sample objects for tests and dictionaries)")
	flag.Parse()
	if *dbFile != "" {
		if err := history(*dbFile, *prefix); err != nil {
			fmt.Fprintln(os.Stderr, "etcdsize:", err)
			os.Exit(1)
		}
		return
	}
	if *get != "" {
		if err := getOne(*endpoints, *prefix, *get); err != nil {
			fmt.Fprintln(os.Stderr, "etcdsize:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*endpoints, *prefix, *compact, *defrag); err != nil {
		fmt.Fprintln(os.Stderr, "etcdsize:", err)
		os.Exit(1)
	}
}

func run(endpoints, prefix string, compact, defrag bool) error {
	eps := strings.Split(endpoints, ",")
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, MaxCallRecvMsgSize: 256 << 20})
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	rev, err := census(ctx, cli, prefix)
	if err != nil {
		return err
	}
	if err := status(ctx, cli, eps[0], "as found"); err != nil {
		return err
	}
	if compact {
		start := time.Now()
		if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
			return fmt.Errorf("compact at %d: %w", rev, err)
		}
		if err := status(ctx, cli, eps[0], fmt.Sprintf("after compaction at %d (%s)", rev, time.Since(start).Round(time.Millisecond))); err != nil {
			return err
		}
	}
	if defrag {
		start := time.Now()
		if _, err := cli.Defragment(ctx, eps[0]); err != nil {
			return fmt.Errorf("defragment %s: %w", eps[0], err)
		}
		if err := status(ctx, cli, eps[0], fmt.Sprintf("after defragmentation (%s)", time.Since(start).Round(time.Millisecond))); err != nil {
			return err
		}
	}
	return nil
}

// getOne prints the decoded value of key.
func getOne(endpoints, prefix, key string) error {
	kind, _, ok := strings.Cut(strings.TrimPrefix(key, prefix), "/")
	if !ok || !strings.HasPrefix(key, prefix) || !nodestore.Kind(kind).Valid() {
		return fmt.Errorf("%s is not an object key under %s", key, prefix)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(endpoints, ","), DialTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, key)
	if err != nil {
		return err
	}
	if len(resp.Kvs) == 0 {
		return fmt.Errorf("%s: not found", key)
	}
	m, err := etcdstore.DecodeValue(nodestore.Kind(kind), resp.Kvs[0].Value)
	if err != nil {
		return fmt.Errorf("decode %s: %w", key, err)
	}
	fmt.Println(protojson.Format(m))
	return nil
}

var (
	show, deflate bool
	dumpDir       string
	dumps         = map[string]*os.File{}
)

// dump appends the value as one JSON line to <dumpDir>/<kind>.jsonl.
func dump(kind string, m proto.Message) error {
	f := dumps[kind]
	if f == nil {
		var err error
		if f, err = os.Create(filepath.Join(dumpDir, kind+".jsonl")); err != nil {
			return err
		}
		dumps[kind] = f
	}
	b, err := protojson.MarshalOptions{}.Marshal(m)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	return err
}

type tally struct {
	keys, keyBytes, valueBytes, maxValue int64
	versions                             int64
	// stored compressed, and the bytes this build's codec would store
	storedCompressed, codecBytes int64
	// deflate estimate: sample values (the dictionary) and compressed bytes
	dict       []byte
	compressed int64
	plain      int64 // DEFLATEd without a dictionary
}

// compressed returns the size of v DEFLATEd with dict as preset dictionary.
func compressedSize(dict, v []byte) int64 {
	var b bytes.Buffer
	w, _ := flate.NewWriterDict(&b, flate.BestCompression, dict)
	_, _ = w.Write(v)
	_ = w.Close()
	return int64(b.Len())
}

// census reads every key under prefix at one revision and prints the tally
// per kind; it returns that revision.
func census(ctx context.Context, cli *clientv3.Client, prefix string) (int64, error) {
	kinds := map[string]*tally{}
	end := clientv3.GetPrefixRangeEnd(prefix)
	from, rev := prefix, int64(0)
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(5000)}
		if rev > 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := cli.Get(ctx, from, opts...)
		if err != nil {
			return 0, fmt.Errorf("list %s: %w", prefix, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			kind, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), prefix), "/")
			t := kinds[kind]
			if t == nil {
				t = &tally{}
				kinds[kind] = t
			}
			// Objects (not election keys): decode, plain or compressed.
			var m proto.Message
			if k := nodestore.Kind(kind); k.Valid() {
				if m, err = etcdstore.DecodeValue(k, kv.Value); err != nil {
					return 0, fmt.Errorf("decode %s: %w", kv.Key, err)
				}
				enc, err := etcdstore.EncodeValue(k, m)
				if err != nil {
					return 0, err
				}
				t.codecBytes += int64(len(enc))
			} else {
				t.codecBytes += int64(len(kv.Value))
			}
			if etcdstore.IsCompressed(kv.Value) {
				t.storedCompressed++
			}
			if t.keys == 0 && show && m != nil {
				fmt.Printf("%s (%d B): %s\n", kv.Key, len(kv.Value), protojson.Format(m))
			}
			if dumpDir != "" && m != nil {
				if err := dump(kind, m); err != nil {
					return 0, err
				}
			}
			if deflate {
				// The estimate is about the protobuf bytes, whatever is stored.
				v := kv.Value
				if m != nil {
					v, _ = proto.Marshal(m)
				}
				// The first 16 values of a kind are the dictionary (as a
				// codec would ship one, built from sample objects).
				if t.keys < 16 {
					t.dict = append(t.dict, v...)
				}
				t.compressed += compressedSize(t.dict, v)
				t.plain += compressedSize(nil, v)
			}
			t.keys++
			t.keyBytes += int64(len(kv.Key))
			t.valueBytes += int64(len(kv.Value))
			t.maxValue = max(t.maxValue, int64(len(kv.Value)))
			t.versions += kv.Version
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	names := slices.Sorted(maps.Keys(kinds))
	var sum tally
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "kind\tkeys\tkey B\tvalue B\tavg value B\tmax value B\tkey+value MB\tversions/key\tcompressed\tcodec B\tcodec key+value MB\tdeflated value B\twith dictionary\t\n")
	row := func(name string, t *tally) {
		avg, vpk := int64(0), 0.0
		if t.keys > 0 {
			avg, vpk = t.valueBytes/t.keys, float64(t.versions)/float64(t.keys)
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%.2f\t%.2f\t%d\t%d\t%.2f\t%d\t%d\t\n", name, t.keys, t.keyBytes, t.valueBytes, avg, t.maxValue,
			float64(t.keyBytes+t.valueBytes)/1e6, vpk, t.storedCompressed, t.codecBytes, float64(t.keyBytes+t.codecBytes)/1e6, t.plain, t.compressed)
	}
	for _, n := range names {
		t := kinds[n]
		row(n, t)
		sum.keys += t.keys
		sum.keyBytes += t.keyBytes
		sum.valueBytes += t.valueBytes
		sum.maxValue = max(sum.maxValue, t.maxValue)
		sum.versions += t.versions
		sum.compressed += t.compressed
		sum.plain += t.plain
		sum.storedCompressed += t.storedCompressed
		sum.codecBytes += t.codecBytes
	}
	row("total", &sum)
	_ = w.Flush()
	fmt.Printf("revision %d\n", rev)
	return rev, nil
}

func status(ctx context.Context, cli *clientv3.Client, ep, when string) error {
	st, err := cli.Status(ctx, ep)
	if err != nil {
		return fmt.Errorf("status of %s: %w", ep, err)
	}
	fmt.Printf("%-40s db %7.1f MiB  in use %7.1f MiB  revision %d\n", when+":",
		float64(st.DbSize)/(1<<20), float64(st.DbSizeInUse)/(1<<20), st.Header.Revision)
	return nil
}

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
// It reads every value under the prefix (paged at one revision), so run it
// against a test or benchmark member, or expect one full read of the fleet.
package main

import (
	"bytes"
	"compress/flate"
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/nodepulse/nodepulse/services/nodestore"
)

func main() {
	endpoints := flag.String("endpoints", "127.0.0.1:2379", "comma-separated etcd client endpoints")
	prefix := flag.String("prefix", "/nodepulse/", "key prefix to account for")
	compact := flag.Bool("compact", false, "after the first report, compact the history up to the current revision and report again")
	defrag := flag.Bool("defrag", false, "after that, defragment the first endpoint's member and report again")
	flag.BoolVar(&show, "show", false, "print the first value of each kind as JSON")
	flag.BoolVar(&deflate, "deflate", false, "also estimate each kind's value bytes if every value were DEFLATE-compressed with a dictionary of sample values of its kind")
	flag.Parse()
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

var show, deflate bool

type tally struct {
	keys, keyBytes, valueBytes, maxValue int64
	versions                             int64
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
			if t.keys == 0 && show {
				if k := nodestore.Kind(kind); k.Valid() {
					m := k.New()
					if err := proto.Unmarshal(kv.Value, m); err == nil {
						fmt.Printf("%s (%d B): %s\n", kv.Key, len(kv.Value), protojson.Format(m))
					}
				}
			}
			if deflate {
				// The first 16 values of a kind are the dictionary (as a
				// codec would ship one, built from sample objects).
				if t.keys < 16 {
					t.dict = append(t.dict, kv.Value...)
				}
				t.compressed += compressedSize(t.dict, kv.Value)
				t.plain += compressedSize(nil, kv.Value)
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
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	var sum tally
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "kind\tkeys\tkey B\tvalue B\tavg value B\tmax value B\tkey+value MB\tversions/key\tdeflated value B\twith dictionary\t\n")
	row := func(name string, t *tally) {
		avg, vpk := int64(0), 0.0
		if t.keys > 0 {
			avg, vpk = t.valueBytes/t.keys, float64(t.versions)/float64(t.keys)
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%.2f\t%.2f\t%d\t%d\t\n", name, t.keys, t.keyBytes, t.valueBytes, avg, t.maxValue,
			float64(t.keyBytes+t.valueBytes)/1e6, vpk, t.plain, t.compressed)
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

// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package nodestore

import "context"

// KindWatchOptions narrow a kind watch.
type KindWatchOptions struct {
	// DeletesOnly: deliver deletions only (etcd filters puts on the
	// server, so they are neither sent nor decoded).
	DeletesOnly bool
}

// KindWatcher is implemented by stores that watch one kind's prefix alone.
// A collector follows pods and node deletions; a watch of the whole prefix
// would also deliver, and decode, every status write and lease checkpoint
// of the fleet, most of what the store is written.
type KindWatcher interface {
	// WatchKind is Watch restricted to objects of kind k (and to their
	// deletions with DeletesOnly). Progress notifications and errors are
	// delivered as by Watch.
	WatchKind(ctx context.Context, k Kind, afterRev int64, opts KindWatchOptions) <-chan WatchBatch
}

// WatchKind watches kind k with w's KindWatcher when it has one, and else
// filters w's watch of the whole prefix. A batch whose events were all
// filtered out is dropped unless it is a progress notification or an error.
func WatchKind(ctx context.Context, w Watcher, k Kind, afterRev int64, opts KindWatchOptions) <-chan WatchBatch {
	if kw, ok := w.(KindWatcher); ok {
		return kw.WatchKind(ctx, k, afterRev, opts)
	}
	in := w.Watch(ctx, afterRev)
	out := make(chan WatchBatch, 16)
	go func() {
		defer close(out)
		for b := range in {
			evs := b.Events[:0:0]
			for _, e := range b.Events {
				if e.Object.Kind == k && (!opts.DeletesOnly || e.Type == DeleteEvent) {
					evs = append(evs, e)
				}
			}
			if len(evs) == 0 && !b.Progress && b.Err == nil {
				continue
			}
			b.Events = evs
			select {
			case out <- b:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package api

import (
	"context"
	"encoding/base64"
	"errors"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/nodepulse/nodepulse/monitor/internal/authz"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/services/nodestore"
	"github.com/nodepulse/nodepulse/services/validation"
)

// Page sizes of ListNodes and ListPods.
const (
	DefaultPageSize = 500
	MaxPageSize     = 5000
	casRetries      = 5
)

// base is what NodeService and PodService share: the store they write, the
// watch cache they read, their log and clock.
type base struct {
	store nodestore.Store
	cache *cache.Cache
	lg    *zap.Logger
	now   func() time.Time
}

func newBase(store nodestore.Store, c *cache.Cache, lg *zap.Logger, now func() time.Time) base {
	if now == nil {
		now = time.Now
	}
	return base{store: store, cache: c, lg: lg, now: now}
}

// audit logs a change with who asked for it; subject is "node" or "pod".
func (b *base) audit(ctx context.Context, subject, what, name string, fields ...zap.Field) {
	b.lg.Info(what, append([]zap.Field{zap.String(subject, name), zap.String("caller", authz.Caller(ctx))}, fields...)...)
}

// readYourWritesWait bounds how long a write waits for this replica's cache.
const readYourWritesWait = 2 * time.Second

// waitCache waits, briefly, until this replica's cache reflects revision
// rev, so that a read through the same replica right after a write sees it
// (`nodepulse taint` then `nodepulse describe`, as kubectl users expect).
// Reads are served from the watch cache, which trails etcd by one watch
// delivery; under load that was long enough for the read to miss the write.
func (b *base) waitCache(ctx context.Context, rev int64) {
	t := time.NewTimer(readYourWritesWait)
	defer t.Stop()
	for {
		changed := b.cache.Changed() // before the check: no wake-up is lost
		if b.cache.Revision() >= rev {
			return
		}
		select {
		case <-changed:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// rewrite is one optimistic change of the record kind/name: it reads the
// record, lets ops build the writes from what was read (conditional on its
// ModRevision), and applies them in one transaction; when the record changed
// in between it reads again, up to casRetries times, or returns conflict
// when that is set (the client named the revision it meant). what names the
// record in errors (`node "n1"`, "pod ns/p"), verb the write ("write",
// "delete"). It returns the record as read and the revision written, 0 when
// ops had nothing to write.
func (b *base) rewrite(ctx context.Context, kind nodestore.Kind, name, what, verb string, conflict error,
	ops func(o nodestore.Object) ([]nodestore.Op, error)) (nodestore.Object, int64, error) {
	for range casRetries {
		o, err := b.store.Get(ctx, kind, name)
		if errors.Is(err, nodestore.ErrNotFound) {
			return o, 0, status.Errorf(codes.NotFound, "%s not found", what)
		}
		if err != nil {
			return o, 0, status.Errorf(codes.Unavailable, "read %s: %v", what, err)
		}
		w, err := ops(o)
		if err != nil || len(w) == 0 {
			return o, 0, err
		}
		rev, err := b.store.Apply(ctx, nil, w...)
		if errors.Is(err, nodestore.ErrConflict) {
			if conflict != nil {
				return o, 0, conflict
			}
			continue
		}
		if err != nil {
			return o, 0, status.Errorf(codes.Unavailable, "%s %s: %v", verb, what, err)
		}
		return o, rev, nil
	}
	return nodestore.Object{}, 0, status.Errorf(codes.Aborted, "%s kept changing; try again", what)
}

// watchFrom is where a watch starts: after rv when the client resumes;
// otherwise sendAll sends the current objects as ADDED and returns the
// version they were listed at.
func watchFrom(rv string, sendAll func() (cache.Version, error)) (cache.Version, error) {
	if rv == "" {
		return sendAll()
	}
	from, err := cache.ParseVersion(rv)
	if err != nil {
		return from, status.Error(codes.InvalidArgument, "resourceVersion: "+err.Error())
	}
	return from, nil
}

// follow streams the cache's changes after from, in order, until ctx ends:
// next returns up to a page of changes and a channel closed when more
// arrive; send delivers one change and returns its version. A version the
// cache no longer holds is OutOfRange (the Kubernetes "410 Gone"): the
// client lists again and watches from the list's version.
func follow[C any](ctx context.Context, from cache.Version, next func(cache.Version, int) ([]C, <-chan struct{}, error),
	send func(C) (cache.Version, error)) error {
	for {
		changes, wait, err := next(from, 1000)
		if errors.Is(err, cache.ErrTooOld) {
			return status.Errorf(codes.OutOfRange, "resourceVersion %s is too old: list again and watch from the list's resourceVersion", from)
		}
		if err != nil {
			return status.Error(codes.Internal, err.Error())
		}
		for _, ch := range changes {
			if from, err = send(ch); err != nil {
				return err
			}
		}
		if len(changes) > 0 {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wait:
		}
	}
}

// watchEvent maps a change of an object (cur, and old before it) through
// a filter: an object that starts matching is ADDED, one that stops
// matching is DELETED (as Kubernetes filtered watches do); "" when the
// watcher does not see the change.
func watchEvent[T any](match func(T) bool, typ string, cur, old T) (string, T) {
	var none T
	now := match(cur)
	switch typ {
	case cache.Added, cache.Deleted:
		if now {
			return typ, cur
		}
		return "", none
	}
	was := match(old)
	switch {
	case was && now:
		return cache.Modified, cur
	case now:
		return cache.Added, cur
	case was:
		return cache.Deleted, old
	}
	return "", none
}

// pageParams reads a list call's page size (0 → DefaultPageSize, capped at
// MaxPageSize) and continue token (the last name of the previous page,
// base64url) into the size and the name to continue after.
func pageParams(pageSize int32, token, rpc string) (int, string, error) {
	size := int(pageSize)
	switch {
	case size < 0:
		return 0, "", status.Error(codes.InvalidArgument, "pageSize: must not be negative")
	case size == 0:
		size = DefaultPageSize
	case size > MaxPageSize:
		size = MaxPageSize
	}
	if token == "" {
		return size, "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) == 0 {
		return 0, "", status.Error(codes.InvalidArgument, "pageToken: not a token returned by "+rpc)
	}
	return size, string(b), nil
}

// pageToken is the continue token after the page whose last name is last.
func pageToken(last string) string { return base64.RawURLEncoding.EncodeToString([]byte(last)) }

// invalid turns a field error into InvalidArgument (nil stays nil).
func invalid(fe *validation.FieldError) error {
	if fe == nil {
		return nil
	}
	return validation.Status(fe)
}

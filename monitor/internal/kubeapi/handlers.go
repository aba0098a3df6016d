// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package kubeapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodepulse/nodepulse/monitor/internal/kubeapi/selectors"
	"github.com/nodepulse/nodepulse/monitor/internal/kubeapi/table"
	"github.com/nodepulse/nodepulse/monitor/internal/kubeapi/watch"
)

// serve dispatches a resource request by verb.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, res *resource, req request) error {
	if r.Method == http.MethodGet && !acceptsJSON(r.Header.Get("Accept")) {
		return newErr(406, metav1.StatusReasonNotAcceptable, "only application/json (and Table as JSON) is served; protobuf clients fall back to JSON when their Accept lists it")
	}
	switch {
	case r.Method == http.MethodGet && req.name == "" && isTrue(r.URL.Query().Get("watch")):
		return s.serveWatch(w, r, res, req)
	case r.Method == http.MethodGet && req.name == "":
		return s.serveList(w, r, res, req)
	case r.Method == http.MethodGet && (req.sub == "" || req.sub == "status"):
		if res.get == nil {
			return s.getFromList(w, r, res, req)
		}
		o, err := res.get(r.Context(), req.namespace, req.name)
		if err != nil {
			return err
		}
		s.writeObject(w, r, res, o)
		return nil
	case r.Method == http.MethodPatch && res.name == "nodes" && (req.sub == "" || req.sub == "status"):
		return s.patchNode(w, r, req.name)
	case r.Method == http.MethodDelete && res.name == "pods" && req.sub == "":
		return s.deletePod(w, r, req.namespace, req.name)
	case r.Method == http.MethodPost && res.name == "pods" && req.sub == "eviction":
		return s.evictPod(w, r, req.namespace, req.name)
	}
	return methodNotAllowed(strings.ToLower(r.Method) + " is not supported on " + res.name + subSuffix(req.sub) + " by nodepulse")
}

func subSuffix(sub string) string {
	if sub == "" {
		return ""
	}
	return "/" + sub
}

func isTrue(s string) bool { return s == "true" || s == "1" }

// acceptsJSON: JSON is all this server writes; a client that lists it (or
// */*) anywhere in Accept gets it, a protobuf-only client 406.
func acceptsJSON(accept string) bool {
	return accept == "" || strings.Contains(accept, "application/json") || strings.Contains(accept, "*/*")
}

func wantsTable(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "as=Table")
}

// getFromList serves a GET of one object of a resource without a direct
// lookup (events, namespaces).
func (s *Server) getFromList(w http.ResponseWriter, r *http.Request, res *resource, req request) error {
	p, err := res.list(r.Context(), req.namespace, selectors.Selectors{}, 0, "")
	if err != nil {
		return err
	}
	for _, o := range p.items {
		if o.meta.Name == req.name {
			s.writeObject(w, r, res, o)
			return nil
		}
	}
	return notFound(res.name, req.name)
}

func (s *Server) writeObject(w http.ResponseWriter, r *http.Request, res *resource, o object) {
	if wantsTable(r) {
		t := table.New(res.name)
		table.Add(t, s.now(), o.obj, *o.meta)
		t.ResourceVersion = o.meta.ResourceVersion
		writeJSON(w, 200, t)
		return
	}
	writeJSON(w, 200, o.obj)
}

func (s *Server) parseSelectors(r *http.Request, res *resource) (selectors.Selectors, error) {
	q := r.URL.Query()
	sel, err := selectors.Parse(res.name, q.Get("labelSelector"), q.Get("fieldSelector"))
	if err != nil {
		return sel, badRequest(err.Error())
	}
	return sel, nil
}

func (s *Server) serveList(w http.ResponseWriter, r *http.Request, res *resource, req request) error {
	sel, err := s.parseSelectors(r, res)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	limit := 0
	if l := q.Get("limit"); l != "" {
		if limit, err = strconv.Atoi(l); err != nil || limit < 0 {
			return badRequest("limit: must be a non-negative number")
		}
	}
	p, err := res.list(r.Context(), req.namespace, sel, limit, q.Get("continue"))
	if err != nil {
		if ae, ok := err.(*apiError); ok && ae.st.Code == 422 && q.Get("continue") != "" {
			return newErr(410, metav1.StatusReasonExpired, "the provided continue parameter is not valid: "+ae.st.Message)
		}
		return err
	}
	if wantsTable(r) {
		t := table.New(res.name)
		now := s.now()
		for _, o := range p.items {
			table.Add(t, now, o.obj, *o.meta)
		}
		t.ResourceVersion, t.Continue = p.rv, p.cont
		writeJSON(w, 200, t)
		return nil
	}
	items := make([]runtime.Object, len(p.items))
	for i, o := range p.items {
		items[i] = o.obj
	}
	writeJSON(w, 200, struct {
		Kind       string           `json:"kind"`
		APIVersion string           `json:"apiVersion"`
		Metadata   metav1.ListMeta  `json:"metadata"`
		Items      []runtime.Object `json:"items"`
	}{res.listKind, res.gv, metav1.ListMeta{ResourceVersion: p.rv, Continue: p.cont}, items})
	return nil
}

// serveWatch streams changes. rv "" or "0" starts with the current objects
// as ADDED (kube-apiserver's semantics); sendInitialEvents=true does the
// same and marks their end with the initial-events-end bookmark, which
// client-go's streaming list waits for.
func (s *Server) serveWatch(w http.ResponseWriter, r *http.Request, res *resource, req request) error {
	if res.watch == nil && res.snapshot == nil {
		return methodNotAllowed("watch is not supported on " + res.name + " by nodepulse; list it again instead")
	}
	sel, err := s.parseSelectors(r, res)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	initial := isTrue(q.Get("sendInitialEvents"))
	if initial && q.Get("resourceVersionMatch") != string(metav1.ResourceVersionMatchNotOlderThan) {
		return invalid("sendInitialEvents requires resourceVersionMatch=NotOlderThan")
	}
	bookmarks := isTrue(q.Get("allowWatchBookmarks"))
	timeout := s.maxWatch
	if t := q.Get("timeoutSeconds"); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 {
			return badRequest("timeoutSeconds: must be a non-negative number")
		}
		if n > 0 {
			timeout = time.Duration(n) * time.Second
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	rv := q.Get("resourceVersion")
	var base snapshot
	if res.snapshot != nil {
		// Taken before the list, so that a change between the two is sent
		// again (as MODIFIED or ADDED) rather than lost. A watch resuming
		// from a version starts from now: there is no history to replay.
		if base, err = res.snapshot(ctx, req.namespace); err != nil {
			return err
		}
	}
	var listed []object
	if rv == "" || rv == "0" || initial {
		p, err := res.list(ctx, req.namespace, sel, 0, "")
		if err != nil {
			return err
		}
		listed, rv = p.items, p.rv
	}
	out := watch.Start(w)
	var mu sync.Mutex
	tableSent := false
	send := func(typ string, o object) error {
		mu.Lock()
		defer mu.Unlock()
		if wantsTable(r) && typ != watch.Bookmark && typ != watch.Error {
			t := table.New(res.name)
			if tableSent {
				t.ColumnDefinitions = nil
			}
			tableSent = true
			table.Add(t, s.now(), o.obj, *o.meta)
			t.ResourceVersion = o.meta.ResourceVersion
			return out.Send(typ, t)
		}
		return out.Send(typ, o.obj)
	}
	filter := watch.NewFilter()
	last := rv
	for _, o := range listed {
		filter.Next(o.meta.Namespace+"/"+o.meta.Name, watch.Added, true)
		if err := send(watch.Added, o); err != nil {
			return nil
		}
	}
	bookmark := func(end bool) error {
		mu.Lock() // last is written by the watch's goroutine
		defer mu.Unlock()
		md := metav1.ObjectMeta{ResourceVersion: last}
		if end {
			md.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
		}
		return out.Send(watch.Bookmark, map[string]any{"kind": res.kind, "apiVersion": res.gv, "metadata": md})
	}
	if initial {
		if err := bookmark(true); err != nil {
			return nil
		}
	}
	if bookmarks {
		go func() {
			t := time.NewTicker(s.bookmarkEvery)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					if bookmark(false) != nil {
						cancel()
						return
					}
				}
			}
		}()
	}
	changed := func(typ string, o object, evRV string) error {
		match := typ != watch.Deleted && sel.Matches(o.meta.Labels, o.fields)
		// Without a selector every change is the client's as it is: a
		// watch resumed from a version has no record of what the client
		// saw, and the filter would make a MODIFIED of an object listed
		// earlier an ADDED and drop its DELETED.
		ev := typ
		if !sel.Everything() {
			ev = filter.Next(o.meta.Namespace+"/"+o.meta.Name, typ, match)
		}
		mu.Lock()
		last = evRV
		mu.Unlock()
		if ev == "" {
			return nil
		}
		// The event's version, not the object's: a client resumes from
		// it, and several objects can change in one etcd revision.
		o.meta.ResourceVersion = evRV
		return send(ev, o)
	}
	if res.watch != nil {
		err = res.watch(ctx, req.namespace, rv, sel, changed)
	} else {
		err = s.pollWatch(ctx, res, req.namespace, base, changed)
	}
	if err != nil && ctx.Err() == nil {
		st := fromGRPC(res.name, "", err).st
		mu.Lock()
		_ = out.Send(watch.Error, st)
		mu.Unlock()
	}
	return nil
}

// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package kubeapi

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/nodepulse/nodepulse/monitor/internal/kubeapi/table"
)

// resource is what every served collection has: its names for routing and
// discovery, its types, its table, and how it reads. Each storage below
// embeds one and adds the verbs it serves (k8s.io/apiserver derives the
// verbs of discovery and of the routes from the interfaces a storage
// implements, so a verb is served exactly when its method exists).
type resource struct {
	gr         schema.GroupResource
	kind       string
	singular   string
	namespaced bool
	short      []string
	categories []string
	newObj     func() runtime.Object
	newList    func() runtime.Object
	// fields is the object's field set for field selectors.
	fields func(runtime.Object) fields.Set
	// fetch reads one page from the services (limit 0: all), after cont.
	fetch func(ctx context.Context, ns string, sel labels.Selector, f fields.Selector, limit int64, cont string) (items []runtime.Object, rv, next string, err error)
	// get reads one object (nil: found through fetch).
	get func(ctx context.Context, ns, name string) (runtime.Object, error)
	now func() time.Time
}

var (
	_ rest.Storage              = (*resource)(nil)
	_ rest.Scoper               = (*resource)(nil)
	_ rest.KindProvider         = (*resource)(nil)
	_ rest.SingularNameProvider = (*resource)(nil)
	_ rest.Lister               = (*resource)(nil)
	_ rest.Getter               = (*resource)(nil)
	_ rest.ShortNamesProvider   = (*resource)(nil)
	_ rest.CategoriesProvider   = (*resource)(nil)
)

func (r *resource) New() runtime.Object        { return r.newObj() }
func (r *resource) NewList() runtime.Object    { return r.newList() }
func (r *resource) Destroy()                   {}
func (r *resource) NamespaceScoped() bool      { return r.namespaced }
func (r *resource) Kind() string               { return r.kind }
func (r *resource) GetSingularName() string    { return r.singular }
func (r *resource) ShortNames() []string       { return r.short }
func (r *resource) Categories() []string       { return r.categories }
func (r *resource) notFound(name string) error { return statusError(r.gr, r.kind, name, errNotFound) }

// Get implements rest.Getter.
func (r *resource) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	ns := genericapirequest.NamespaceValue(ctx)
	if r.get != nil {
		return r.get(ctx, ns, name)
	}
	items, _, err := r.all(ctx, ns, labels.Everything(), fields.OneTermEqualSelector("metadata.name", name))
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, r.notFound(name)
	}
	return items[0], nil
}

// matches applies the selectors the services could not.
func (r *resource) matches(o runtime.Object, l labels.Selector, f fields.Selector) bool {
	if l != nil && !l.Empty() {
		m, err := meta.Accessor(o)
		if err != nil || !l.Matches(labels.Set(m.GetLabels())) {
			return false
		}
	}
	if f != nil && !f.Empty() {
		return f.Matches(r.fieldSet(o))
	}
	return true
}

func (r *resource) fieldSet(o runtime.Object) fields.Set {
	if r.fields != nil {
		return r.fields(o)
	}
	m, err := meta.Accessor(o)
	if err != nil {
		return fields.Set{}
	}
	return metaFields(m.GetName(), m.GetNamespace(), r.namespaced)
}

func metaFields(name, ns string, namespaced bool) fields.Set {
	s := fields.Set{"metadata.name": name}
	if namespaced {
		s["metadata.namespace"] = ns
	}
	return s
}

// page reads from cont: the one backend page asked for when the client set
// a limit (a page may then hold fewer matches than the limit, as
// kube-apiserver's pages after filtering may), else every page.
func (r *resource) page(ctx context.Context, ns string, l labels.Selector, f fields.Selector, limit int64, cont string) ([]runtime.Object, string, string, error) {
	if l == nil {
		l = labels.Everything()
	}
	if f == nil {
		f = fields.Everything()
	}
	var out []runtime.Object
	for token := cont; ; {
		items, rv, next, err := r.fetch(ctx, ns, l, f, limit, token)
		if err != nil {
			return nil, "", "", err
		}
		for _, o := range items {
			if r.matches(o, l, f) {
				out = append(out, o)
			}
		}
		if limit > 0 || next == "" {
			return out, rv, next, nil
		}
		token = next
	}
}

func (r *resource) all(ctx context.Context, ns string, l labels.Selector, f fields.Selector) ([]runtime.Object, string, error) {
	items, rv, _, err := r.page(ctx, ns, l, f, 0, "")
	return items, rv, err
}

// List implements rest.Lister.
func (r *resource) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	ns := genericapirequest.NamespaceValue(ctx)
	var l labels.Selector
	var f fields.Selector
	var limit int64
	cont := ""
	if opts != nil {
		l, f, limit, cont = opts.LabelSelector, opts.FieldSelector, opts.Limit, opts.Continue
	}
	items, rv, next, err := r.page(ctx, ns, l, f, limit, cont)
	if err != nil {
		return nil, err
	}
	list := r.newList()
	if err := meta.SetList(list, items); err != nil {
		return nil, err
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return nil, err
	}
	lm.SetResourceVersion(rv)
	lm.SetContinue(next)
	return list, nil
}

// ConvertToTable implements rest.TableConvertor with upstream's columns
// (package table).
func (r *resource) ConvertToTable(_ context.Context, obj runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	t := table.New(r.gr.Resource)
	now := r.now()
	add := func(o runtime.Object) error {
		m, err := meta.Accessor(o)
		if err != nil {
			return err
		}
		table.Add(t, now, o, metav1.ObjectMeta{Name: m.GetName(), Namespace: m.GetNamespace(), Labels: m.GetLabels(), CreationTimestamp: m.GetCreationTimestamp()})
		// The handlers turn the row's object into what includeObject asks
		// (PartialObjectMetadata by default) from the whole object.
		t.Rows[len(t.Rows)-1].Object = runtime.RawExtension{Object: o}
		return nil
	}
	if meta.IsListType(obj) {
		if err := meta.EachListItem(obj, add); err != nil {
			return nil, err
		}
		if lm, err := meta.ListAccessor(obj); err == nil {
			t.ResourceVersion, t.Continue = lm.GetResourceVersion(), lm.GetContinue()
		}
		return t, nil
	}
	if err := add(obj); err != nil {
		return nil, err
	}
	if m, err := meta.Accessor(obj); err == nil {
		t.ResourceVersion = m.GetResourceVersion()
	}
	return t, nil
}

// watcher is a watch.Interface fed by a goroutine that runs until Stop.
type watcher struct {
	ch     chan watch.Event
	cancel context.CancelFunc
	once   sync.Once
}

func (w *watcher) Stop()                          { w.once.Do(w.cancel) }
func (w *watcher) ResultChan() <-chan watch.Event { return w.ch }

// bookmarkEvery spaces the bookmarks of a watch that allows them
// (kube-apiserver sends one about every minute).
var bookmarkEvery = time.Minute

// follow is a resource's change feed after rv: it calls send for every
// change, in order, with the version after it, until ctx ends.
type follow func(ctx context.Context, ns, rv string, send func(typ watch.EventType, o runtime.Object, rv string) bool) error

// startWatch serves a watch with kube-apiserver's semantics over a change
// feed: rv "" or "0" (or sendInitialEvents) starts with an ADDED for every
// matching object, listed first, and the watch follows from the list's
// version, so nothing changed in between is lost; with sendInitialEvents
// and bookmarks allowed the initial events end with the
// k8s.io/initial-events-end bookmark client-go's streaming list waits for;
// allowed bookmarks then come every bookmarkEvery. With a selector an
// object that starts matching is ADDED and one that stops is DELETED.
func (r *resource) startWatch(ctx context.Context, opts *metainternalversion.ListOptions, feed follow) (watch.Interface, error) {
	ns := genericapirequest.NamespaceValue(ctx)
	if opts.LabelSelector == nil {
		opts.LabelSelector = labels.Everything()
	}
	if opts.FieldSelector == nil {
		opts.FieldSelector = fields.Everything()
	}
	rv := opts.ResourceVersion
	initial := rv == "" || rv == "0" || (opts.SendInitialEvents != nil && *opts.SendInitialEvents)
	var listed []runtime.Object
	if initial {
		items, lrv, err := r.all(ctx, ns, opts.LabelSelector, opts.FieldSelector)
		if err != nil {
			return nil, err
		}
		listed, rv = items, lrv
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &watcher{ch: make(chan watch.Event, 100), cancel: cancel}
	filtered := (opts.LabelSelector != nil && !opts.LabelSelector.Empty()) || (opts.FieldSelector != nil && !opts.FieldSelector.Empty())
	go func() {
		defer close(w.ch)
		defer cancel()
		var mu sync.Mutex
		last := rv
		emit := func(ev watch.Event) bool {
			select {
			case w.ch <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		}
		bookmark := func(end bool) bool {
			mu.Lock()
			o := r.newObj()
			m, _ := meta.Accessor(o)
			m.SetResourceVersion(last)
			mu.Unlock()
			if end {
				m.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
			}
			return emit(watch.Event{Type: watch.Bookmark, Object: o})
		}
		seen := map[string]bool{}
		key := func(o runtime.Object) string {
			m, _ := meta.Accessor(o)
			return m.GetNamespace() + "/" + m.GetName()
		}
		for _, o := range listed {
			seen[key(o)] = true
			if !emit(watch.Event{Type: watch.Added, Object: o}) {
				return
			}
		}
		if initial && opts.AllowWatchBookmarks && opts.SendInitialEvents != nil && *opts.SendInitialEvents && !bookmark(true) {
			return
		}
		if opts.AllowWatchBookmarks {
			go func() {
				t := time.NewTicker(bookmarkEvery)
				defer t.Stop()
				for {
					select {
					case <-ctx.Done():
						return
					case <-t.C:
						if !bookmark(false) {
							return
						}
					}
				}
			}()
		}
		err := feed(ctx, ns, rv, func(typ watch.EventType, o runtime.Object, evRV string) bool {
			mu.Lock()
			last = evRV
			mu.Unlock()
			if filtered {
				k := key(o)
				match := typ != watch.Deleted && r.matches(o, opts.LabelSelector, opts.FieldSelector)
				was := seen[k]
				switch {
				case match && was:
					typ = watch.Modified
				case match:
					typ = watch.Added
				case was:
					typ = watch.Deleted
				default:
					return true
				}
				if match {
					seen[k] = true
				} else {
					delete(seen, k)
				}
			}
			// The event's version, not the object's: a client resumes
			// from it, and several objects can change in one revision.
			if m, err := meta.Accessor(o); err == nil {
				m.SetResourceVersion(evRV)
			}
			return emit(watch.Event{Type: typ, Object: o})
		})
		if err != nil && ctx.Err() == nil {
			se := statusError(r.gr, r.kind, "", err)
			if st, ok := se.(interface{ Status() metav1.Status }); ok {
				s := st.Status()
				emit(watch.Event{Type: watch.Error, Object: &s})
			}
		}
	}()
	return w, nil
}

// createFromUpdate is an update of an object that does not exist, when the
// request may create it (server-side apply of a new object: the patch
// handler asks with forceAllowCreate and builds the object from an empty
// one, which has no UID): the object the request makes, created.
func createFromUpdate(ctx context.Context, empty runtime.Object, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc,
	opts *metav1.UpdateOptions, create func(context.Context, runtime.Object, rest.ValidateObjectFunc, *metav1.CreateOptions) (runtime.Object, error)) (runtime.Object, bool, error) {
	obj, err := objInfo.UpdatedObject(ctx, empty)
	if err != nil {
		return nil, false, err
	}
	out, err := create(ctx, obj, createValidation, &metav1.CreateOptions{DryRun: opts.DryRun, FieldManager: opts.FieldManager, FieldValidation: opts.FieldValidation})
	if err != nil {
		return nil, false, err
	}
	return out, true, nil
}

// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package drain empties a node for maintenance as `kubectl drain` does
// (spec §15.3; upstream kubectl pkg/drain/drain.go, filters.go, cordon.go
// and pkg/cmd/drain/drain.go): cordon the node, list its pods, refuse or
// skip them by kubectl's filters, evict the rest through their disruption
// budgets (retrying refusals every 5 s), and wait until each is gone or
// replaced. It reaches the store only through Cluster, so its timing and
// its lines are tested without gRPC; the NodeService handler fills Cluster.
package drain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/services/podlife"
	"github.com/nodepulse/nodepulse/services/validation"
)

// kubectl's defaults (pkg/drain, pkg/cmd/drain).
const (
	DefaultEvictRetry   = 5 * time.Second
	DefaultPollInterval = 1 * time.Second
)

// kubectl's filter messages (pkg/drain/filters.go).
const (
	msgDaemonSetFatal    = "DaemonSet-managed Pods (use --ignore-daemonsets to ignore)"
	msgDaemonSetWarning  = "ignoring DaemonSet-managed Pods"
	msgLocalStorageFatal = "Pods with local storage (use --delete-emptydir-data to override)"
	msgLocalStorageWarn  = "deleting Pods with local storage"
	msgUnmanagedFatal    = "Pods that declare no controller (use --force to override)"
	msgUnmanagedWarning  = "deleting Pods that declare no controller"
)

// ErrNotFound: the pod (or DaemonSet) does not exist. Cluster
// implementations wrap it.
var ErrNotFound = errors.New("not found")

// ErrReplaced: the pod under the name has another UID (an eviction's UID
// precondition failed): the pod drain meant is gone.
var ErrReplaced = errors.New("replaced")

// RetryError is an eviction refused for now (the disruption budget allows
// no disruption: upstream's HTTP 429); drain retries it.
type RetryError struct{ Message string }

func (e *RetryError) Error() string { return e.Message }

// Cluster is what a drain reads and writes.
type Cluster interface {
	// Cordon sets the node unschedulable; already reports it was so.
	Cordon(ctx context.Context, node string) (already bool, err error)
	// Pods lists the pods bound to node.
	Pods(ctx context.Context, node string) ([]*podv1.Pod, error)
	// DaemonSetExists reports whether the DaemonSet ns/name exists.
	DaemonSetExists(ctx context.Context, ns, name string) (bool, error)
	// Evict evicts the pod through its budgets (uid as precondition):
	// nil, an error wrapping ErrNotFound or ErrReplaced, a *RetryError, or
	// another error (the pod fails the drain).
	Evict(ctx context.Context, ns, name, uid string, grace *int64) error
	// Delete deletes the pod directly (--disable-eviction).
	Delete(ctx context.Context, ns, name, uid string, grace *int64) error
	// Pod reads one pod; ErrNotFound when it is gone.
	Pod(ctx context.Context, ns, name string) (*podv1.Pod, error)
}

// Options of one drain; the zero value is kubectl's defaults.
type Options struct {
	IgnoreDaemonSets   bool
	DeleteEmptyDirData bool
	Force              bool
	DisableEviction    bool
	// GracePeriodSeconds overrides the pods' own grace (nil: theirs).
	GracePeriodSeconds *int64
	// Timeout bounds the whole drain (0: none).
	Timeout time.Duration
	// Match selects the pods by labels (--pod-selector); nil matches all.
	Match func(labels map[string]string) bool
	// EvictRetry and PollInterval: kubectl's 5 s and 1 s when zero.
	EvictRetry, PollInterval time.Duration
	// After waits (tests inject a fake clock; default time.After).
	After func(time.Duration) <-chan time.Time
}

// EventType says what an Event reports.
type EventType int

// Event types, in the order a drain emits them.
const (
	Cordoned EventType = iota + 1
	AlreadyCordoned
	Warning
	// Evicting: the eviction (or deletion) of Pod starts.
	Evicting
	// Retrying: the budget refused; Message is the refusal.
	Retrying
	// Evicted / Deleted: Pod is gone or replaced.
	Evicted
	Deleted
	// Failed: Pod could not be evicted; Message says why.
	Failed
	// Done ends the drain: Drained, and Message ("node/x drained" or the
	// error).
	Done
)

// Event is one step of a drain, with the line kubectl prints for it.
type Event struct {
	Type      EventType
	Node      string
	Namespace string
	Pod       string
	Message   string
	Drained   bool
	// RetryAfter: when a Retrying eviction is tried again.
	RetryAfter time.Duration
}

// Line is what kubectl prints for the event.
func (e Event) Line() string {
	switch e.Type {
	case Cordoned:
		return "node/" + e.Node + " cordoned"
	case AlreadyCordoned:
		return "node/" + e.Node + " already cordoned"
	case Warning:
		return "Warning: " + e.Message
	case Evicting:
		if e.Message != "" {
			return e.Message
		}
		return "evicting pod " + e.Namespace + "/" + e.Pod
	case Retrying:
		return fmt.Sprintf("error when evicting pods/%q -n %q (will retry after %s): %s", e.Pod, e.Namespace, e.RetryAfter, e.Message)
	case Evicted:
		return "pod/" + e.Pod + " evicted"
	case Deleted:
		return "pod/" + e.Pod + " deleted"
	case Failed, Done:
		return e.Message
	}
	return e.Message
}

// Drain drains node with opts, calling emit for every step (from several
// goroutines, never concurrently), and returns the final event. A drain
// that cannot finish (a filter refuses a pod, an eviction fails, the
// timeout) leaves the node cordoned, as kubectl does; running it again
// resumes: cordoning is idempotent and pods already gone are not listed.
func Drain(ctx context.Context, c Cluster, node string, opts Options, emit func(Event)) Event {
	if opts.EvictRetry <= 0 {
		opts.EvictRetry = DefaultEvictRetry
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.After == nil {
		opts.After = time.After
	}
	var mu sync.Mutex
	send := func(e Event) {
		e.Node = node
		mu.Lock()
		defer mu.Unlock()
		emit(e)
	}
	fail := func(err error) Event {
		e := Event{Type: Done, Node: node, Message: fmt.Sprintf("error: unable to drain node %q due to error: %v, continuing command...", node, err)}
		send(e)
		return e
	}
	already, err := c.Cordon(ctx, node)
	if err != nil {
		return fail(err)
	}
	if already {
		send(Event{Type: AlreadyCordoned})
	} else {
		send(Event{Type: Cordoned})
	}
	pods, err := c.Pods(ctx, node)
	if err != nil {
		return fail(err)
	}
	list, err := Filter(ctx, c, pods, opts)
	if err != nil {
		return fail(err)
	}
	if w := list.Warnings(); w != "" {
		send(Event{Type: Warning, Message: w})
	}
	if errs := list.Errors(); len(errs) > 0 {
		return fail(aggregate(errs))
	}
	if err := evictAll(ctx, c, list.Delete(), opts, send); err != nil {
		return fail(err)
	}
	e := Event{Type: Done, Node: node, Drained: true, Message: "node/" + node + " drained"}
	send(e)
	return e
}

// aggregate joins errors as Kubernetes' utilerrors.NewAggregate prints
// them: one alone, several as "[a, b]".
func aggregate(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	s := make([]string, len(errs))
	for i, e := range errs {
		s[i] = e.Error()
	}
	return errors.New("[" + strings.Join(s, ", ") + "]")
}

// evictAll evicts (or deletes) every pod, one goroutine each as kubectl,
// and waits for all of them; the timeout stops every goroutine.
func evictAll(ctx context.Context, c Cluster, pods []*podv1.Pod, opts Options, send func(Event)) error {
	if len(pods) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	timedOut := make(chan struct{})
	if opts.Timeout > 0 {
		// The global timeout runs on the injected clock, so a test replays
		// "--timeout 5s" without waiting five seconds.
		expiry := opts.After(opts.Timeout)
		go func() {
			select {
			case <-expiry:
				close(timedOut)
			case <-ctx.Done():
			}
		}()
	}
	errs := make([]error, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() { errs[i] = evictOne(ctx, c, p, opts, timedOut, send) })
	}
	wg.Wait()
	var out []error
	for _, e := range errs {
		if e != nil {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return aggregate(out)
}

// evictOne is kubectl's per-pod goroutine: evict with retries on a
// refusal, then poll until the pod is gone or replaced.
func evictOne(ctx context.Context, c Cluster, p *podv1.Pod, opts Options, timedOut <-chan struct{}, send func(Event)) error {
	ns, name, uid := p.GetMetadata().GetNamespace(), p.GetMetadata().GetName(), p.GetMetadata().GetUid()
	timeout := func(stage string) error {
		if stage == "wait" {
			return fmt.Errorf("error when waiting for pod %q in namespace %q to terminate: global timeout reached: %v", name, ns, opts.Timeout)
		}
		return fmt.Errorf("error when evicting pods/%q -n %q: global timeout reached: %v", name, ns, opts.Timeout)
	}
	if opts.DisableEviction {
		send(Event{Type: Evicting, Namespace: ns, Pod: name, Message: "deleting pod " + ns + "/" + name})
	} else {
		send(Event{Type: Evicting, Namespace: ns, Pod: name})
	}
	done := Evicted
	if opts.DisableEviction {
		done = Deleted
	}
	for {
		select {
		case <-timedOut:
			return timeout("evict")
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		var err error
		if opts.DisableEviction {
			err = c.Delete(ctx, ns, name, uid, opts.GracePeriodSeconds)
		} else {
			err = c.Evict(ctx, ns, name, uid, opts.GracePeriodSeconds)
		}
		var retry *RetryError
		switch {
		case err == nil:
		case errors.Is(err, ErrNotFound), errors.Is(err, ErrReplaced):
			// Gone already (a resumed drain): as kubectl's 404, done.
			send(Event{Type: done, Namespace: ns, Pod: name})
			return nil
		case errors.As(err, &retry):
			send(Event{Type: Retrying, Namespace: ns, Pod: name, Message: retry.Message, RetryAfter: opts.EvictRetry})
			select {
			case <-opts.After(opts.EvictRetry):
				continue
			case <-timedOut:
				return timeout("evict")
			case <-ctx.Done():
				return ctx.Err()
			}
		default:
			e := fmt.Errorf("error when evicting pods/%q -n %q: %v", name, ns, err)
			send(Event{Type: Failed, Namespace: ns, Pod: name, Message: e.Error()})
			return e
		}
		break
	}
	// Wait until the pod is gone or another pod holds the name (kubectl's
	// waitForDelete: a StatefulSet's replacement has a new UID).
	for {
		cur, err := c.Pod(ctx, ns, name)
		if errors.Is(err, ErrNotFound) || (err == nil && cur.GetMetadata().GetUid() != uid) {
			send(Event{Type: done, Namespace: ns, Pod: name})
			return nil
		}
		select {
		case <-opts.After(opts.PollInterval):
		case <-timedOut:
			return timeout("wait")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Status is one pod's verdict of the filters (kubectl PodDeleteStatus).
type Status struct {
	Delete  bool
	Message string
	// Error: the pod refuses the drain; otherwise Message is a warning.
	Error bool
}

// Item is a pod and its verdict.
type Item struct {
	Pod    *podv1.Pod
	Status Status
}

// List is the pods of a node with their verdicts, in listing order.
type List []Item

// Delete returns the pods to evict.
func (l List) Delete() []*podv1.Pod {
	var out []*podv1.Pod
	for _, it := range l {
		if it.Status.Delete {
			out = append(out, it.Pod)
		}
	}
	return out
}

// grouped is msg → "ns/pod" in order of first occurrence.
func (l List) grouped(errs bool) ([]string, map[string][]string) {
	var order []string
	by := map[string][]string{}
	for _, it := range l {
		if it.Status.Message == "" || it.Status.Error != errs {
			continue
		}
		m := it.Status.Message
		if _, ok := by[m]; !ok {
			order = append(order, m)
		}
		by[m] = append(by[m], it.Pod.GetMetadata().GetNamespace()+"/"+it.Pod.GetMetadata().GetName())
	}
	return order, by
}

// Errors are kubectl's "cannot delete <message>: ns/pod, …", one per
// message.
func (l List) Errors() []error {
	order, by := l.grouped(true)
	var out []error
	for _, m := range order {
		out = append(out, fmt.Errorf("cannot delete %s: %s", m, strings.Join(by[m], ", ")))
	}
	return out
}

// Warnings is kubectl's "<message>: ns/pod, …; <message>: …" ("" when none).
func (l List) Warnings() string {
	order, by := l.grouped(false)
	var parts []string
	for _, m := range order {
		parts = append(parts, m+": "+strings.Join(by[m], ", "))
	}
	return strings.Join(parts, "; ")
}

// Filter runs kubectl's filters on each pod, in kubectl's order, stopping
// at the first that keeps the pod (skip or error): DaemonSet-controlled,
// mirror, local storage (emptyDir), no controller. As kubectl, the verdict
// is the last filter's, so a warning followed by an "okay" is not shown.
// Pods not matching opts.Match are left out.
func Filter(ctx context.Context, c Cluster, pods []*podv1.Pod, opts Options) (List, error) {
	var out List
	for _, p := range pods {
		if opts.Match != nil && !opts.Match(p.GetMetadata().GetLabels()) {
			continue
		}
		var st Status
		for _, f := range []func(context.Context, Cluster, *podv1.Pod, Options) (Status, error){daemonSetFilter, mirrorFilter, localStorageFilter, unreplicatedFilter} {
			var err error
			if st, err = f(ctx, c, p, opts); err != nil {
				return nil, err
			}
			if !st.Delete {
				break
			}
		}
		out = append(out, Item{Pod: p, Status: st})
	}
	return out, nil
}

var okay = Status{Delete: true}

// controllerRef is the pod's owner reference marked controller, or nil.
func controllerRef(p *podv1.Pod) (kind, name string, ok bool) {
	for _, r := range p.GetMetadata().GetOwnerReferences() {
		if r.GetController() {
			return r.GetKind(), r.GetName(), true
		}
	}
	return "", "", false
}

func daemonSetFilter(ctx context.Context, c Cluster, p *podv1.Pod, opts Options) (Status, error) {
	kind, name, ok := controllerRef(p)
	if !ok || kind != "DaemonSet" || podlife.IsTerminal(p) {
		return okay, nil
	}
	exists, err := c.DaemonSetExists(ctx, p.GetMetadata().GetNamespace(), name)
	if err != nil {
		return Status{}, err
	}
	if !exists {
		// An orphan: kubectl deletes it with a warning under --force.
		msg := fmt.Sprintf("daemonsets.apps %q not found", name)
		if opts.Force {
			return Status{Delete: true, Message: msg}, nil
		}
		return Status{Message: msg, Error: true}, nil
	}
	if !opts.IgnoreDaemonSets {
		return Status{Message: msgDaemonSetFatal, Error: true}, nil
	}
	return Status{Message: msgDaemonSetWarning}, nil
}

func mirrorFilter(_ context.Context, _ Cluster, p *podv1.Pod, _ Options) (Status, error) {
	if _, ok := p.GetMetadata().GetAnnotations()[validation.MirrorPodAnnotation]; ok {
		return Status{}, nil // skipped silently
	}
	return okay, nil
}

// HasEmptyDir reports whether the pod has an emptyDir volume.
func HasEmptyDir(p *podv1.Pod) bool {
	return slices.ContainsFunc(p.GetSpec().GetVolumes(), func(v *podv1.Volume) bool { return v.GetEmptyDir() != nil })
}

func localStorageFilter(_ context.Context, _ Cluster, p *podv1.Pod, opts Options) (Status, error) {
	if !HasEmptyDir(p) || podlife.IsTerminal(p) {
		return okay, nil
	}
	if !opts.DeleteEmptyDirData {
		return Status{Message: msgLocalStorageFatal, Error: true}, nil
	}
	return Status{Delete: true, Message: msgLocalStorageWarn}, nil
}

func unreplicatedFilter(_ context.Context, _ Cluster, p *podv1.Pod, opts Options) (Status, error) {
	if podlife.IsTerminal(p) {
		return okay, nil
	}
	if _, _, ok := controllerRef(p); ok {
		return okay, nil
	}
	if opts.Force {
		return Status{Delete: true, Message: msgUnmanagedWarning}, nil
	}
	return Status{Message: msgUnmanagedFatal, Error: true}, nil
}

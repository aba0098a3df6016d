// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package podagent decides, as the kubelet does for the pods bound to its
// node, what the reporter writes to them when it reaches the control plane
// (docs/spec.md, "The reporter as the node's kubelet"): it finishes the
// graceful deletions requested while it was away (a terminal phase, then a
// grace-0 delete with the pod's uid as precondition), writes Ready=True
// again on the pods it still runs, restoring the transition time it had
// cached, starts the pods bound to it that are still Pending (phase Running,
// Ready=True), and keeps a mirror pod in the API for each static pod of its
// manifest directory. A pod in a terminal phase is left alone; there are
// no containers, so "stopping" a pod is only the status it ends with.
//
// It is pure: the heartbeat client feeds it the collector's PodSync
// messages and the acks of its writes, asks it what to send now and when
// to ask again, and gives it the time, so the table tests replay exact
// timelines.
package podagent

import (
	"maps"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
	"github.com/nodepulse/nodepulse/services/validation"
)

// Defaults of Config.
const (
	// DefaultReconcilePeriod is the kubelet status manager's sync period
	// (syncBatch, 10 s): a pod is written at most once per period, so the
	// reporter and the monitor (which marks pods Ready=False while the
	// node is not Ready) cannot overwrite each other in a tight loop.
	DefaultReconcilePeriod = 10 * time.Second
	// DefaultRetryDelay is the wait before a refused write is decided again.
	DefaultRetryDelay = time.Second
	// MaxInFlight bounds the writes awaiting their acks: the collector
	// queues a few per stream (more are refused), and the rest are decided
	// as the acks come back.
	MaxInFlight = 8
)

// Reasons of the conditions the agent writes.
const (
	// ReasonPodCompleted is the Ready=False reason of a pod in a terminal
	// phase (kubelet GeneratePodReadyCondition).
	ReasonPodCompleted = "PodCompleted"
)

// Conditions the agent writes when it starts a pending pod, besides Ready
// (kubelet types PodConditionsByKubelet).
const (
	ConditionInitialized     = "Initialized"
	ConditionContainersReady = "ContainersReady"
)

// Config of an Agent.
type Config struct {
	// Node is the node's name.
	Node string
	// StaticPods are the static pods of the node (Manifests); their mirror
	// pods are kept in the API.
	StaticPods []*podv1.Pod
	// ReconcilePeriod and RetryDelay: see the defaults.
	ReconcilePeriod time.Duration
	RetryDelay      time.Duration
}

// Kind of an Action.
type Kind uint8

// What the agent asks the collector for.
const (
	// FinishDeletion: write the terminal status, then delete (grace 0).
	FinishDeletion Kind = iota + 1
	// SetReady: write Ready=True on a running pod.
	SetReady
	// CreateMirror: create (or replace) a static pod's mirror pod.
	CreateMirror
	// DeleteMirror: delete a mirror pod whose static pod is gone.
	DeleteMirror
)

func (k Kind) String() string {
	switch k {
	case FinishDeletion:
		return "finish-deletion"
	case SetReady:
		return "set-ready"
	case CreateMirror:
		return "create-mirror"
	case DeleteMirror:
		return "delete-mirror"
	}
	return "unknown"
}

// Action is one write to send (Request, to be numbered by the stream).
type Action struct {
	Kind    Kind
	Key     string // "namespace/name"
	Request *collectorv1.ReportRequest
}

// Agent is the per-process state: the pods of the current stream and the
// Ready transition times cached across streams, as the kubelet's status
// manager keeps them across API server outages.
type Agent struct {
	cfg     Config
	nodeUID string
	synced  bool // a full PodSync arrived on this stream
	pods    map[string]*podv1.Pod
	static  map[string]*podv1.Pod // mirror key → the mirror pod wanted (owner uid unset)

	// readySince: pod uid → lastTransitionTime of the Ready=True the agent
	// last saw stored or wrote for it.
	readySince map[string]time.Time
	inflight   map[string]Kind      // key → write awaiting its ack
	notBefore  map[string]time.Time // key → no write before this
	// waitAfter: key → the kind of the successful write its notBefore
	// follows (absent after a refusal).
	waitAfter map[string]Kind
}

// New returns an agent for cfg.
func New(cfg Config) *Agent {
	if cfg.ReconcilePeriod <= 0 {
		cfg.ReconcilePeriod = DefaultReconcilePeriod
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = DefaultRetryDelay
	}
	a := &Agent{cfg: cfg, pods: map[string]*podv1.Pod{}, static: map[string]*podv1.Pod{},
		readySince: map[string]time.Time{}, inflight: map[string]Kind{}, notBefore: map[string]time.Time{}, waitAfter: map[string]Kind{}}
	for _, s := range cfg.StaticPods {
		m := MirrorOf(s, cfg.Node, "")
		a.static[Key(m)] = m
	}
	return a
}

// Key is a pod's "namespace/name".
func Key(p *podv1.Pod) string {
	return p.GetMetadata().GetNamespace() + "/" + p.GetMetadata().GetName()
}

// Reset starts a stream of the node registered with nodeUID: its pods are
// unknown until the collector's first (full) PodSync; writes in flight on
// the old stream will never be answered. The Ready cache stays.
func (a *Agent) Reset(nodeUID string) {
	a.nodeUID = nodeUID
	a.synced = false
	clear(a.pods)
	clear(a.inflight)
	clear(a.notBefore)
	clear(a.waitAfter)
}

// Sync applies a PodSync from the collector.
func (a *Agent) Sync(m *collectorv1.PodSync) {
	if m.GetFull() {
		a.synced = true
		clear(a.pods)
	}
	for _, p := range m.GetPods() {
		a.pods[Key(p)] = p
		a.cacheReady(p)
	}
	for _, d := range m.GetDeleted() {
		k := d.GetNamespace() + "/" + d.GetName()
		delete(a.pods, k)
		delete(a.readySince, d.GetUid())
		// A mirror pod deleted through the API is recreated at once.
		delete(a.notBefore, k)
		delete(a.waitAfter, k)
	}
	if m.GetFull() {
		live := map[string]bool{}
		for _, p := range a.pods {
			live[p.GetMetadata().GetUid()] = true
		}
		maps.DeleteFunc(a.readySince, func(uid string, _ time.Time) bool { return !live[uid] })
	}
}

// cacheReady remembers when a running pod became Ready, as stored.
func (a *Agent) cacheReady(p *podv1.Pod) {
	c := findCondition(p.GetStatus(), nodemodel.Ready)
	if c.GetStatus() == nodemodel.True && c.GetLastTransitionTime() != nil {
		a.readySince[p.GetMetadata().GetUid()] = c.GetLastTransitionTime().AsTime()
	}
}

// Done records the ack of the write for key: ok, or refused (decided again
// after the retry delay). A successful write is not repeated within the
// reconcile period: the PodSync showing its effect follows the ack.
func (a *Agent) Done(key string, ok bool, now time.Time) {
	k := a.inflight[key]
	delete(a.inflight, key)
	if ok {
		a.notBefore[key] = now.Add(a.cfg.ReconcilePeriod)
		a.waitAfter[key] = k
	} else {
		a.notBefore[key] = now.Add(a.cfg.RetryDelay)
		delete(a.waitAfter, key)
	}
}

// NextWake is when Decide may have something new to do without a new
// PodSync or ack: the earliest end of a wait; ok false when none.
func (a *Agent) NextWake() (time.Time, bool) {
	var t time.Time
	for _, nb := range a.notBefore {
		if t.IsZero() || nb.Before(t) {
			t = nb
		}
	}
	return t, !t.IsZero()
}

// ready reports whether key may be written at now.
func (a *Agent) ready(key string, now time.Time) bool {
	if _, busy := a.inflight[key]; busy {
		return false
	}
	if nb, ok := a.notBefore[key]; ok {
		if now.Before(nb) {
			return false
		}
		delete(a.notBefore, key)
		delete(a.waitAfter, key)
	}
	return true
}

// Decide returns the writes to send now, in key order, and marks them in
// flight.
func (a *Agent) Decide(now time.Time) []Action {
	if !a.synced {
		return nil
	}
	var out []Action
	add := func(k Kind, key string, req *collectorv1.ReportRequest) {
		a.inflight[key] = k
		out = append(out, Action{Kind: k, Key: key, Request: req})
	}
	busy := func() bool { return len(a.inflight) >= MaxInFlight }
	for _, key := range slices.Sorted(maps.Keys(a.pods)) {
		if busy() {
			return out
		}
		p := a.pods[key]
		md := p.GetMetadata()
		mirror := isMirrorOf(p, a.cfg.Node)
		if w, ok := a.waitAfter[key]; ok && w != FinishDeletion && !mirror && md.GetDeletionTimestamp() != nil {
			// A deletion is finished at once, as the kubelet's pod workers
			// act on a deletionTimestamp as soon as they see it: the
			// reconcile wait keeps the reporter and the monitor from
			// fighting over Ready, and a deletion is nothing to fight over.
			// (A reporter resuming reads the pod's older states first and
			// may have written Ready just before it learns of the deletion.)
			delete(a.notBefore, key)
			delete(a.waitAfter, key)
		}
		if !a.ready(key, now) {
			continue
		}
		if mirror {
			if _, ok := a.static[key]; !ok {
				// kubelet deleteOrphanedMirrorPods: its static pod is gone.
				add(DeleteMirror, key, &collectorv1.ReportRequest{Message: &collectorv1.ReportRequest_PodDelete{PodDelete: &collectorv1.PodDelete{
					Namespace: md.GetNamespace(), Name: md.GetName(), Uid: md.GetUid()}}})
				continue
			}
			if md.GetDeletionTimestamp() != nil || !a.mirrorCurrent(key, p) {
				continue // replaced below, with the static pods
			}
		} else if md.GetDeletionTimestamp() != nil {
			add(FinishDeletion, key, &collectorv1.ReportRequest{Message: &collectorv1.ReportRequest_PodDelete{PodDelete: &collectorv1.PodDelete{
				Namespace: md.GetNamespace(), Name: md.GetName(), Uid: md.GetUid(), Status: Terminated(p.GetStatus(), now)}}})
			continue
		}
		if st, ok := a.readyStatus(p, now); ok {
			add(SetReady, key, &collectorv1.ReportRequest{Message: &collectorv1.ReportRequest_PodStatus{PodStatus: &collectorv1.PodStatusUpdate{
				Namespace: md.GetNamespace(), Name: md.GetName(), Uid: md.GetUid(), Status: st}}})
		}
	}
	if a.nodeUID == "" {
		return out
	}
	for _, key := range slices.Sorted(maps.Keys(a.static)) {
		cur := a.pods[key]
		if cur != nil && cur.GetMetadata().GetDeletionTimestamp() == nil && a.mirrorCurrent(key, cur) {
			continue
		}
		if busy() {
			return out
		}
		if !a.ready(key, now) {
			continue
		}
		m := proto.CloneOf(a.static[key])
		m.Metadata.OwnerReferences[0].Uid = a.nodeUID
		m.Status = &podv1.PodStatus{Phase: validation.PodRunning, Conditions: []*podv1.PodCondition{{
			Type: nodemodel.Ready, Status: nodemodel.True, LastTransitionTime: nodemodel.Timestamp(now)}}}
		add(CreateMirror, key, &collectorv1.ReportRequest{Message: &collectorv1.ReportRequest_MirrorPod{MirrorPod: &collectorv1.MirrorPod{Pod: m}}})
	}
	return out
}

// mirrorCurrent: the stored mirror pod mirrors the static pod as it is now
// (its hash) for the node as registered now (owner uid).
func (a *Agent) mirrorCurrent(key string, cur *podv1.Pod) bool {
	want := a.static[key]
	if want == nil {
		return false
	}
	h := validation.MirrorPodAnnotation
	if cur.GetMetadata().GetAnnotations()[h] != want.GetMetadata().GetAnnotations()[h] {
		return false
	}
	for _, r := range cur.GetMetadata().GetOwnerReferences() {
		if r.GetController() {
			return r.GetUid() == a.nodeUID
		}
	}
	return false
}

// readyStatus is the status to write on a live pod the node runs (phase
// Running) whose Ready is not True: Ready=True with the transition time the
// agent cached when it last saw the pod Ready (the kubelet re-sends its
// cached condition, so the time reverts to before the outage, upstream
// issue #119514), or now when it has none (a restarted reporter, or a pod
// it never saw Ready). Every other condition (DisruptionTarget) is kept. A
// Pending pod is started (startedStatus).
func (a *Agent) readyStatus(p *podv1.Pod, now time.Time) (*podv1.PodStatus, bool) {
	st := p.GetStatus()
	if ph := st.GetPhase(); ph == validation.PodPending || ph == "" {
		a.readySince[p.GetMetadata().GetUid()] = now
		return startedStatus(p, now), true
	}
	if st.GetPhase() != validation.PodRunning || findCondition(st, nodemodel.Ready).GetStatus() == nodemodel.True {
		return nil, false
	}
	uid := p.GetMetadata().GetUid()
	since, ok := a.readySince[uid]
	if !ok {
		since = now
		a.readySince[uid] = now
	}
	out := proto.CloneOf(st)
	if out == nil {
		out = &podv1.PodStatus{}
	}
	setCondition(out, &podv1.PodCondition{Type: nodemodel.Ready, Status: nodemodel.True, LastTransitionTime: nodemodel.Timestamp(since)})
	for _, c := range out.ContainerStatuses {
		c.Ready = true
	}
	return out, true
}

// startedStatus is the status of a Pending pod bound to the node once the
// node starts it, as the kubelet's SyncPod does (generateAPIPodStatus):
// phase Running since now, each container of the spec running and ready,
// Initialized, ContainersReady and Ready True. nodepulse runs no
// containers and no probes, so a started pod is at once ready; without
// this, pods the owner controllers create would stay Pending.
func startedStatus(p *podv1.Pod, now time.Time) *podv1.PodStatus {
	out := proto.CloneOf(p.GetStatus())
	if out == nil {
		out = &podv1.PodStatus{}
	}
	out.Phase = validation.PodRunning
	ts := nodemodel.Timestamp(now)
	if out.StartTime == nil {
		out.StartTime = ts
	}
	started := true
	out.ContainerStatuses = nil
	for _, c := range p.GetSpec().GetContainers() {
		out.ContainerStatuses = append(out.ContainerStatuses, &podv1.ContainerStatus{Name: c.GetName(), Image: c.GetImage(), Ready: true, Started: &started,
			State: &podv1.ContainerState{Running: &podv1.ContainerStateRunning{StartedAt: ts}}})
	}
	for _, t := range []string{ConditionInitialized, ConditionContainersReady, nodemodel.Ready} {
		setCondition(out, &podv1.PodCondition{Type: t, Status: nodemodel.True, LastTransitionTime: ts})
	}
	return out
}

// Terminated is the status a pod ends with when its deletion stops it: its
// phase Failed unless it already ended (upstream sets Failed unless every
// container exited 0; a pod stopped by a deletion is killed, and nodepulse
// models no containers to have exited on their own), Ready=False with
// reason PodCompleted (transition now if it was not False), every other
// condition kept.
func Terminated(st *podv1.PodStatus, now time.Time) *podv1.PodStatus {
	out := proto.CloneOf(st)
	if out == nil {
		out = &podv1.PodStatus{}
	}
	if out.Phase != validation.PodFailed && out.Phase != validation.PodSucceeded {
		out.Phase = validation.PodFailed
	}
	c := &podv1.PodCondition{Type: nodemodel.Ready, Status: nodemodel.False, Reason: ReasonPodCompleted, LastTransitionTime: nodemodel.Timestamp(now)}
	if old := findCondition(out, nodemodel.Ready); old.GetStatus() == nodemodel.False && old.GetLastTransitionTime() != nil {
		c.LastTransitionTime = old.GetLastTransitionTime()
	}
	setCondition(out, c)
	// Its containers were killed (SIGTERM, then SIGKILL at the grace
	// period's end): terminated with the kubelet's words for a kill.
	notStarted := false
	for _, cs := range out.ContainerStatuses {
		var began *timestamppb.Timestamp
		if r := cs.GetState().GetRunning(); r != nil {
			began = r.GetStartedAt()
		}
		if cs.GetState().GetTerminated() != nil {
			continue
		}
		cs.Ready, cs.Started = false, &notStarted
		cs.State = &podv1.ContainerState{Terminated: &podv1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", StartedAt: began, FinishedAt: nodemodel.Timestamp(now)}}
	}
	return out
}

func findCondition(st *podv1.PodStatus, t string) *podv1.PodCondition {
	for _, c := range st.GetConditions() {
		if c.GetType() == t {
			return c
		}
	}
	return nil
}

// setCondition replaces the condition of c's type, or appends c.
func setCondition(st *podv1.PodStatus, c *podv1.PodCondition) {
	for i, old := range st.Conditions {
		if old.GetType() == c.GetType() {
			st.Conditions[i] = c
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}

func isMirrorOf(p *podv1.Pod, node string) bool {
	if p.GetMetadata().GetAnnotations()[validation.MirrorPodAnnotation] == "" {
		return false
	}
	for _, r := range p.GetMetadata().GetOwnerReferences() {
		if r.GetController() {
			return r.GetKind() == validation.OwnerKindNode && r.GetName() == node
		}
	}
	return false
}

// staticToleration is the kubelet's toleration of every static pod: every
// NoExecute taint, for ever.
func staticToleration() *nodev1.Toleration {
	return &nodev1.Toleration{Operator: validation.OpExists, Effect: nodemodel.NoExecute}
}

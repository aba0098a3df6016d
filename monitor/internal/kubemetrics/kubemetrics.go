// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package kubemetrics exports the monitor's view of every node under
// kube-state-metrics' metric names and labels (kube_node_status_condition,
// kube_node_spec_taint, kube_node_info, kube_lease_renew_time ...), so
// Kubernetes node dashboards and alerts (kubernetes-mixin) work against a
// nodepulse fleet with only their job selector changed (docs/spec.md,
// "Kubernetes-compatible metrics").
//
// Nothing per node is kept between scrapes: Collect copies the cache's
// entries (pointers to immutable nodes) under its read lock, lets it go, and
// builds the samples from that copy. A scrape never holds the cache's lock
// while Prometheus encodes, so the health pass and the watch never wait for
// a slow scraper.
package kubemetrics

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/cache"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/liveness"
)

// Modes: which replicas export.
const (
	// ModeLeader: only the leader exports, so every node has exactly one
	// series across the replicas and kubernetes-mixin's sums and alerts work
	// unchanged.
	ModeLeader = "leader"
	// ModeAll: every replica exports; queries must aggregate the replicas
	// away (max without (instance, pod)).
	ModeAll = "all"
	// ModeOff: none.
	ModeOff = "off"
)

// NodeLeaseNamespace is the namespace kube_lease_renew_time names, where
// Kubernetes keeps node leases.
const NodeLeaseNamespace = "kube-node-lease"

// Metric names, as kube-state-metrics names them.
const (
	MetricNodeCondition     = "kube_node_status_condition"
	MetricNodeUnschedulable = "kube_node_spec_unschedulable"
	MetricNodeTaint         = "kube_node_spec_taint"
	MetricNodeInfo          = "kube_node_info"
	MetricNodeCapacity      = "kube_node_status_capacity"
	MetricNodeAllocatable   = "kube_node_status_allocatable"
	MetricNodeCreated       = "kube_node_created"
	MetricNodeLabels        = "kube_node_labels"
	MetricLeaseRenewTime    = "kube_lease_renew_time"
	// MetricNodeClockSkew is nodepulse's own: kube-state-metrics has no
	// such series (Kubernetes never measures node clocks).
	MetricNodeClockSkew = "nodepulse_node_clock_skew_seconds"
)

// Source is the watch cache.
type Source interface {
	AppendEntries(dst []cache.Entry) ([]cache.Entry, int64)
}

// Liveness is what the monitor hears on the collectors' feeds.
type Liveness interface {
	Node(name string) liveness.Node
}

// Config of the collector.
type Config struct {
	// Mode: ModeLeader (default), ModeAll or ModeOff.
	Mode string
	// Leading reports whether this replica leads (ModeLeader).
	Leading func() bool
	// NodeLabels are the node label keys kube_node_labels carries, as
	// label_<key sanitized> (kube-state-metrics' --metric-labels-allowlist
	// for nodes, exact keys only). Empty: no kube_node_labels, as
	// kube-state-metrics by default.
	NodeLabels []string
}

// Validate checks the mode and the label keys.
func (c Config) Validate() error {
	switch c.Mode {
	case "", ModeLeader, ModeAll, ModeOff:
	default:
		return fmt.Errorf("kube-state metrics mode %q: want %s, %s or %s", c.Mode, ModeLeader, ModeAll, ModeOff)
	}
	seen := map[string]string{}
	for _, k := range c.NodeLabels {
		if k == "" {
			return fmt.Errorf("empty node label key in the kube_node_labels allowlist")
		}
		n := LabelName("label", k)
		if o, dup := seen[n]; dup {
			return fmt.Errorf("node labels %q and %q would both be exported as %s", o, k, n)
		}
		seen[n] = k
	}
	return nil
}

// family is one metric family: its Desc and its label names, sorted (the
// registry expects sorted label pairs; every sample's pairs follow this
// order).
type family struct {
	desc  *prometheus.Desc
	names []string
	// index of each label name in names.
	index map[string]int
	// byNode: the labels before the node's in names ("condition" before
	// "node") are few and repeat on every node, so the samples can be
	// grouped by them and stay in node order within a group (sorted
	// without sorting); otherwise (kube_node_info: internal_ip comes
	// before node) the family is sorted at the end of a scrape.
	byNode bool
	prefix int // len(names before "node"/"lease")
	idx    int // the family's position in Collector.families()
}

func newFamily(byNode bool, name, help string, labels ...string) *family {
	names := slices.Clone(labels)
	slices.Sort(names)
	f := &family{desc: prometheus.NewDesc(name, help, names, nil), names: names, index: map[string]int{}, byNode: byNode}
	for i, n := range names {
		f.index[n] = i
		if n == "node" || n == "lease" {
			f.prefix = i
		}
	}
	return f
}

// Collector is a prometheus.Collector of the kube_* node series.
type Collector struct {
	cfg  Config
	src  Source
	live Liveness

	condition, unschedulable, taint, info, capacity, allocatable, created, labels, lease, skew *family
	// labelKeys[i] is the node label key of labels.names[i] ("" for
	// "node").
	labelKeys []string

	// mu serialises scrapes so they share buf, the copy of the cache's
	// entries (100,000 of them: 8 MB that would otherwise be allocated
	// anew by every scrape).
	mu  sync.Mutex
	buf []cache.Entry
}

// New returns the collector; register it on the admin registry.
func New(cfg Config, src Source, live Liveness) (*Collector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Mode == "" {
		cfg.Mode = ModeLeader
	}
	c := &Collector{cfg: cfg, src: src, live: live}
	c.condition = newFamily(true, MetricNodeCondition, "The condition of a cluster node.", "node", "condition", "status")
	c.unschedulable = newFamily(true, MetricNodeUnschedulable, "Whether a node can schedule new pods.", "node")
	c.taint = newFamily(true, MetricNodeTaint, "The taint of a cluster node.", "node", "key", "value", "effect")
	c.info = newFamily(false, MetricNodeInfo, "Information about a cluster node.", "node", "kernel_version", "os_image", "container_runtime_version",
		"kubelet_version", "kubeproxy_version", "provider_id", "pod_cidr", "system_uuid", "internal_ip")
	c.capacity = newFamily(true, MetricNodeCapacity, "The capacity for different resources of a node.", "node", "resource", "unit")
	c.allocatable = newFamily(true, MetricNodeAllocatable, "The allocatable for different resources of a node that are available for scheduling.", "node", "resource", "unit")
	c.created = newFamily(true, MetricNodeCreated, "Unix creation timestamp", "node")
	c.lease = newFamily(true, MetricLeaseRenewTime, "Kube lease renew time.", "lease", "namespace")
	c.skew = newFamily(true, MetricNodeClockSkew, "How far the node's clock was from its collector's at its latest status report, in seconds (positive: ahead). Shown, never judged by: liveness is dated by the control plane's clocks. Absent until this monitor has seen a report.", "node")
	if len(cfg.NodeLabels) > 0 {
		byName := map[string]string{}
		names := []string{"node"}
		for _, k := range cfg.NodeLabels {
			n := LabelName("label", k)
			byName[n] = k
			names = append(names, n)
		}
		c.labels = newFamily(false, MetricNodeLabels, "Kubernetes labels converted to Prometheus labels.", names...)
		for _, n := range c.labels.names {
			c.labelKeys = append(c.labelKeys, byName[n])
		}
	}
	for i, f := range c.families() {
		f.idx = i
	}
	return c, nil
}

func (c *Collector) families() []*family {
	fs := []*family{c.condition, c.unschedulable, c.taint, c.info, c.capacity, c.allocatable, c.created, c.lease, c.skew}
	if c.labels != nil {
		fs = append(fs, c.labels)
	}
	return fs
}

// Describe sends every family's Desc.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range c.families() {
		ch <- f.desc
	}
}

// Exporting reports whether this replica exports now.
func (c *Collector) Exporting() bool {
	switch c.cfg.Mode {
	case ModeOff:
		return false
	case ModeAll:
		return true
	default:
		return c.cfg.Leading != nil && c.cfg.Leading()
	}
}

// Collect sends the series of every node in the cache.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if !c.Exporting() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	entries, _ := c.src.AppendEntries(c.buf[:0])
	// Between scrapes the buffer must not keep deleted nodes alive.
	defer func() { clear(entries); c.buf = entries[:0] }()
	b := newBuilder(c)
	for i := range entries {
		b.node(&entries[i])
	}
	b.send(ch)
}

// builder makes one scrape's samples.
//
// The registry copies nothing it is given: a sample's label pairs are
// shared wherever their value is (status="true" on every node, the node's
// own pair on all its series), cut from arenas, so a series costs the
// registry's dto.Metric and little else. It also sorts each family by label
// values; pdqsort is linear on sorted input, so samples are sent sorted
// (see family.byNode): in a 10,000-node profile the comparisons of that
// sort were the largest cost of a scrape.
type builder struct {
	c *Collector
	// groups[family.idx] maps a prefix of label values (joined with 0) to
	// the samples with that prefix, in node order.
	groups []map[string][]*sample
	// pairs caches the pairs of values that repeat across nodes.
	pairs  map[pairKey]*dto.LabelPair
	arena  []*dto.LabelPair
	slab   []sample
	single []ownPair
	// units memoises quantity strings: most nodes of a fleet report the
	// same few ("4", "16Gi", "110"), parsed once a scrape.
	units map[string]unitValue
	keys  []string
	vals  []*dto.LabelPair
	// resPairs: the resource and unit pairs of each resource name (unit
	// nil: not exported); res is a reused list of names.
	resPairs map[string]resourcePairs
	res      []string
}

type resourcePairs struct{ name, unit *dto.LabelPair }

func (b *builder) resource(r string) resourcePairs {
	rp, ok := b.resPairs[r]
	if !ok {
		if u := Unit(r); u != "" {
			rp = resourcePairs{b.shared("resource", SanitizeLabelName(r)), b.shared("unit", u)}
		}
		b.resPairs[r] = rp
	}
	return rp
}

type pairKey struct{ name, value string }

type unitValue struct {
	v  float64
	ok bool
}

const chunk = 4096

func newBuilder(c *Collector) *builder {
	b := &builder{c: c, pairs: map[pairKey]*dto.LabelPair{}, units: map[string]unitValue{}, resPairs: map[string]resourcePairs{}}
	for range c.families() {
		b.groups = append(b.groups, map[string][]*sample{})
	}
	return b
}

// shared returns the pair name=value, one for the whole scrape.
func (b *builder) shared(name, value string) *dto.LabelPair {
	p, ok := b.pairs[pairKey{name, value}]
	if !ok {
		k := pairKey{name, value} // escapes only here
		p = &dto.LabelPair{Name: &k.name, Value: &k.value}
		b.pairs[k] = p
	}
	return p
}

// ownPair is a pair with room for its value.
type ownPair struct {
	p dto.LabelPair
	v string
}

// Names of the labels whose values are unique to a node.
var (
	labelNode       = "node"
	labelLease      = "lease"
	labelInternalIP = "internal_ip"
	labelProviderID = "provider_id"
	labelSystemUUID = "system_uuid"
)

// own returns a new pair name=value, for a value unique to a node.
func (b *builder) own(name *string, value string) *dto.LabelPair {
	if len(b.single) == 0 {
		b.single = make([]ownPair, chunk)
	}
	o := &b.single[0]
	b.single = b.single[1:]
	o.v = value
	o.p.Name, o.p.Value = name, &o.v
	return &o.p
}

// emit records a sample of f; pairs are in the order of f.names.
func (b *builder) emit(f *family, v float64, pairs ...*dto.LabelPair) {
	if len(b.arena) < len(pairs) {
		b.arena = make([]*dto.LabelPair, max(chunk, len(pairs)))
	}
	ls := b.arena[:len(pairs):len(pairs)]
	b.arena = b.arena[len(pairs):]
	copy(ls, pairs)
	if len(b.slab) == 0 {
		b.slab = make([]sample, chunk)
	}
	s := &b.slab[0]
	b.slab = b.slab[1:]
	s.desc, s.labels, s.value = f.desc, ls, v
	s.gauge.Value = &s.value
	key := ""
	if f.byNode && f.prefix > 0 {
		b.keys = b.keys[:0]
		for _, p := range pairs[:f.prefix] {
			b.keys = append(b.keys, p.GetValue())
		}
		key = strings.Join(b.keys, "\x00")
	}
	g := b.groups[f.idx]
	g[key] = append(g[key], s)
}

// with returns f's pairs, in the order of f.names, from name=pair.
func (b *builder) with(f *family, kv ...any) []*dto.LabelPair {
	b.vals = slices.Grow(b.vals[:0], len(f.names))[:len(f.names)]
	clear(b.vals)
	for i := 0; i < len(kv); i += 2 {
		b.vals[f.index[kv[i].(string)]] = kv[i+1].(*dto.LabelPair)
	}
	return b.vals
}

// send sends every family's samples, each family sorted.
func (b *builder) send(ch chan<- prometheus.Metric) {
	for _, f := range b.c.families() {
		g := b.groups[f.idx]
		keys := make([]string, 0, len(g))
		for k := range g {
			keys = append(keys, k)
		}
		// Joined with 0, which sorts before any other byte, keys sort as
		// the tuples of values they join.
		slices.Sort(keys)
		for _, k := range keys {
			ss := g[k]
			if !f.byNode {
				slices.SortFunc(ss, compareSamples)
			}
			for _, s := range ss {
				ch <- s
			}
		}
	}
}

func compareSamples(a, b *sample) int {
	for i := range a.labels {
		if c := strings.Compare(a.labels[i].GetValue(), b.labels[i].GetValue()); c != 0 {
			return c
		}
	}
	return 0
}

// Constant label values.
var statuses = []struct{ label, status string }{{"false", "False"}, {"true", "True"}, {"unknown", "Unknown"}} // sorted by label

// node records one node's series. Within one family and prefix group the
// node's samples are emitted sorted by the labels after the node's.
func (b *builder) node(e *cache.Entry) {
	c := b.c
	n := e.Node
	st := n.GetStatus()
	node := b.own(&labelNode, e.Name)

	for _, cond := range st.GetConditions() {
		ct := b.shared("condition", cond.GetType())
		for _, s := range statuses {
			b.emit(c.condition, boolValue(strings.EqualFold(cond.GetStatus(), s.status)),
				b.with(c.condition, "condition", ct, "node", node, "status", b.shared("status", s.label))...)
		}
	}
	b.emit(c.unschedulable, boolValue(n.GetSpec().GetUnschedulable()), node)
	for _, t := range n.GetSpec().GetTaints() {
		b.emit(c.taint, 1, b.with(c.taint, "effect", b.shared("effect", t.GetEffect()), "key", b.shared("key", t.GetKey()), "node", node,
			"value", b.shared("value", t.GetValue()))...)
	}
	internalIP := ""
	for _, a := range st.GetAddresses() {
		if a.GetType() == "InternalIP" {
			internalIP = a.GetAddress()
		}
	}
	ni := st.GetNodeInfo()
	// kube-state-metrics writes "deprecated" as the kube-proxy version
	// (the kubelet no longer reports one); nodepulse has no pod CIDR.
	b.emit(c.info, 1, b.with(c.info,
		"container_runtime_version", b.shared("container_runtime_version", ni.GetContainerRuntimeVersion()),
		"internal_ip", b.own(&labelInternalIP, internalIP),
		"kernel_version", b.shared("kernel_version", ni.GetKernelVersion()),
		"kubelet_version", b.shared("kubelet_version", ni.GetReporterVersion()),
		"kubeproxy_version", b.shared("kubeproxy_version", "deprecated"),
		"node", node,
		"os_image", b.shared("os_image", ni.GetOsImage()),
		"pod_cidr", b.shared("pod_cidr", ""),
		"provider_id", b.own(&labelProviderID, n.GetSpec().GetProviderId()),
		"system_uuid", b.own(&labelSystemUUID, ni.GetSystemUuid()))...)
	b.resources(c.capacity, node, st.GetCapacity())
	b.resources(c.allocatable, node, st.GetAllocatable())
	if ct := n.GetMetadata().GetCreationTimestamp(); ct != nil {
		b.emit(c.created, float64(ct.GetSeconds()), node)
	}
	if c.labels != nil {
		labels := n.GetMetadata().GetLabels()
		ps := make([]*dto.LabelPair, len(c.labels.names))
		for i, k := range c.labelKeys {
			if c.labels.names[i] == "node" {
				ps[i] = node
			} else {
				ps[i] = b.shared(c.labels.names[i], labels[k])
			}
		}
		b.emit(c.labels, 1, ps...)
	}
	// The newest renewal the monitor knows: the live feed's, or the
	// checkpoint in etcd when that is newer (after a monitor restart,
	// before the feed delivers). Both are the reporter's clock, as
	// upstream's renewTime is the kubelet's.
	var renew time.Time
	if rt := e.Lease.GetSpec().GetRenewTime(); rt != nil {
		renew = rt.AsTime()
	}
	var ln liveness.Node
	if c.live != nil {
		ln = c.live.Node(e.Name)
		if ln.RenewTime.After(renew) {
			renew = ln.RenewTime
		}
	}
	if !renew.IsZero() {
		b.emit(c.lease, float64(renew.Unix()), b.own(&labelLease, e.Name), b.shared("namespace", NodeLeaseNamespace))
	}
	if !ln.ClockSkewAt.IsZero() {
		b.emit(c.skew, ln.ClockSkew.Seconds(), node)
	}
}

// resources records capacity or allocatable as kube-state-metrics does:
// cpu in cores, memory and storage in bytes, pods and extended resources
// as integers; other resources are left out. Sorted by resource name.
func (b *builder) resources(f *family, node *dto.LabelPair, rs map[string]string) {
	names := b.res[:0]
	for r := range rs {
		if b.resource(r).unit != nil {
			names = append(names, r)
		}
	}
	b.res = names
	// Sorted by the exported (sanitized) name, as the registry sorts.
	slices.SortFunc(names, func(x, y string) int {
		return strings.Compare(b.resource(x).name.GetValue(), b.resource(y).name.GetValue())
	})
	for _, r := range names {
		q := rs[r]
		uv, ok := b.units[q]
		if !ok {
			uv.v, uv.ok = quantityValue(q)
			b.units[q] = uv
		}
		if !uv.ok {
			continue
		}
		rp := b.resource(r)
		b.emit(f, uv.v, node, rp.name, rp.unit)
	}
}

// quantityValue is kube-state-metrics' conversion of a quantity: its value
// to three decimals (millicores stay fractional).
func quantityValue(s string) (float64, bool) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, false
	}
	if q.Value() > resource.MaxMilliValue {
		return float64(q.Value()), true
	}
	return float64(q.MilliValue()) / 1000, true
}

// Unit of a resource as kube-state-metrics labels it: "core", "byte",
// "integer", or "" for a resource it does not export.
func Unit(r string) string {
	switch {
	case r == "cpu":
		return "core"
	case r == "memory" || r == "storage" || r == "ephemeral-storage":
		return "byte"
	case r == "pods":
		return "integer"
	case strings.HasPrefix(r, "hugepages-"), strings.HasPrefix(r, "attachable-volumes-"):
		return "byte"
	case isExtended(r):
		return "integer"
	}
	return ""
}

// isExtended: a domain-prefixed resource outside kubernetes.io and outside
// "requests." (the Kubernetes definition of an extended resource).
func isExtended(r string) bool {
	if !strings.Contains(r, "/") || strings.Contains(r, "kubernetes.io/") || strings.HasPrefix(r, "requests.") {
		return false
	}
	return qualifiedName.MatchString("requests." + r)
}

// qualifiedName is Kubernetes' qualified name: an optional DNS subdomain
// prefix and a name of at most 63 characters.
var qualifiedName = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)

var allCaps = regexp.MustCompile(`([a-z0-9])([A-Z])`)

// SanitizeLabelName replaces every character Prometheus does not allow in
// a label name by '_', as kube-state-metrics does with resource names.
func SanitizeLabelName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || '0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' {
			return r
		}
		return '_'
	}, s)
}

// LabelName is kube-state-metrics' name for a Kubernetes label key:
// prefix_ and the key sanitized, in snake case.
func LabelName(prefix, key string) string {
	return prefix + "_" + strings.ToLower(allCaps.ReplaceAllString(SanitizeLabelName(key), "${1}_${2}"))
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// sample is one gauge, immutable once sent: a const metric whose label
// pairs and value are ready to hand to the registry as they are.
type sample struct {
	desc   *prometheus.Desc
	labels []*dto.LabelPair
	value  float64
	gauge  dto.Gauge
}

func (s *sample) Desc() *prometheus.Desc { return s.desc }

func (s *sample) Write(m *dto.Metric) error {
	m.Label, m.Gauge = s.labels, &s.gauge
	return nil
}

// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package defrag gives back the space etcd's database keeps after
// compaction. Compaction deletes old revisions from bbolt pages but never
// shrinks the file, and a page is merged with its neighbours only when it is
// nearly empty: revisions are appended at the end of the file, so a page
// that mixed long-lived records (a node, its status) with short-lived ones
// (the lease checkpoints of a registration storm) stays partly empty for
// good. At 100,000 nodes that is ~30 % of the file, which pushed it from
// ~88 to ~110 MiB in a long run (docs/benchmarks.md). Only a
// defragmentation, which rewrites the file, returns it.
//
// Free pages show in a member's status (DBSize - DBSizeInUse); partly
// empty pages do not: they count as in use. So a member is due when its
// file is at least MinSize, this leader has not defragmented it within
// MinInterval, and either
//   - free pages are at least FreePercent of its file, the usual rule of
//     etcd defrag tools, or
//   - its bytes in use have grown GrowthPercent beyond the smallest figure
//     seen since its last defragmentation (or since this leadership began),
//     which is how partly empty pages, and a fleet that grew, show, and
//     have stopped growing: they are within 1 % of what they were
//     PlateauRounds looks earlier. Until then, whatever a registration
//     storm wrote is still being superseded and compacted; a
//     defragmentation in the middle would pack records that are about to
//     be deleted next to long-lived ones, and the holes would come back.
//
// A member serves nothing while it defragments (about a second per 100 MB),
// so only the leading monitor defragments, one member at a time, followers
// before the etcd leader, with a pause between them, and only a while after
// a compaction (Settle): etcd deletes compacted revisions in the background,
// and defragmenting before it has finished would pack soon-deleted records
// into the new file.
package defrag

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/nodepulse/nodepulse/services/metric"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// Metric names (deploy/prometheus, deploy/grafana).
const (
	MetricDefrags       = "nodepulse_monitor_etcd_defrags_total"
	MetricDefragSeconds = "nodepulse_monitor_etcd_defrag_duration_seconds"
	MetricReclaimed     = "nodepulse_monitor_etcd_defrag_reclaimed_bytes_total"
)

// Results of one member's defragmentation (label "result" of MetricDefrags).
const (
	ResultDefragmented = "defragmented"
	ResultError        = "error"
)

// Reasons a member is due (log field "reason").
const (
	ReasonFree   = "free_pages"
	ReasonGrowth = "in_use_growth"
)

// Leader is what the defragmenter needs from the lifecycle controller.
type Leader interface {
	// Leadership returns the fence and a channel closed when it ends.
	Leadership() (nodestore.Fence, <-chan struct{}, bool)
}

// Config of the defragmenter.
type Config struct {
	// Enabled turns automatic defragmentation on.
	Enabled bool
	// MinSize: smaller files are never defragmented (not worth blocking a
	// member for).
	MinSize int64
	// FreePercent, GrowthPercent and PlateauRounds: the rules in the
	// package comment.
	FreePercent, GrowthPercent float64
	PlateauRounds              int
	// MinInterval between two defragmentations of one member.
	MinInterval time.Duration
	// Settle: how long after a compaction the members are looked at.
	Settle time.Duration
	// Pause between two members, so the first catches up before the next
	// stops serving.
	Pause time.Duration
	// Timeout of one member's defragmentation.
	Timeout time.Duration
	// After and Now are the clock (tests inject one); default the time
	// package's.
	After func(d time.Duration) <-chan time.Time
	Now   func() time.Time
}

// DefaultConfig is the production setting (the monitor's flags).
func DefaultConfig() Config {
	return Config{
		Enabled:       true,
		MinSize:       64 << 20,
		FreePercent:   25,
		GrowthPercent: 5,
		PlateauRounds: 5,
		MinInterval:   15 * time.Minute,
		Settle:        time.Minute,
		Pause:         10 * time.Second,
		Timeout:       5 * time.Minute,
	}
}

// Validate checks the settings; names are the monitor's flags.
func (c Config) Validate() error {
	switch {
	case c.MinSize < 0:
		return fmt.Errorf("--etcd.defrag-min-size-mib (%d MiB) must not be negative", c.MinSize>>20)
	case c.FreePercent <= 0 || c.FreePercent >= 100:
		return fmt.Errorf("--etcd.defrag-free-percent (%g) must be between 0 and 100", c.FreePercent)
	case c.GrowthPercent <= 0:
		return fmt.Errorf("--etcd.defrag-growth-percent (%g) must be positive", c.GrowthPercent)
	case c.PlateauRounds < 1:
		return fmt.Errorf("defrag plateau rounds (%d) must be at least 1", c.PlateauRounds)
	case c.MinInterval < 0:
		return fmt.Errorf("--etcd.defrag-min-interval (%s) must not be negative", c.MinInterval)
	case c.Settle < 0 || c.Pause < 0 || c.Timeout <= 0:
		return fmt.Errorf("defrag settle %s, pause %s, timeout %s: settle and pause must not be negative, timeout must be positive", c.Settle, c.Pause, c.Timeout)
	}
	return nil
}

// memberState is what the leader remembers of one member.
type memberState struct {
	floor  int64     // smallest in-use size seen since its last defrag
	recent []int64   // in-use sizes of the last PlateauRounds+1 looks, oldest first
	last   time.Time // when this leader last defragmented it (zero: never)
}

// look records one in-use size.
func (ms *memberState) look(inUse int64, rounds int) {
	if ms.floor == 0 || inUse < ms.floor {
		ms.floor = inUse
	}
	ms.recent = append(ms.recent, inUse)
	if n := len(ms.recent) - (rounds + 1); n > 0 {
		ms.recent = append(ms.recent[:0], ms.recent[n:]...)
	}
}

// steady says whether the in-use size stopped growing: within 1 % of what
// it was PlateauRounds looks ago.
func (ms memberState) steady(rounds int) bool {
	if len(ms.recent) < rounds+1 {
		return false
	}
	return float64(ms.recent[len(ms.recent)-1]) <= float64(ms.recent[0])*1.01
}

// due says whether st makes the member due, and why.
func (c Config) due(st nodestore.MemberStatus, ms memberState, now time.Time) (string, bool) {
	if st.DBSize < c.MinSize || st.DBSize <= 0 {
		return "", false
	}
	if !ms.last.IsZero() && now.Sub(ms.last) < c.MinInterval {
		return "", false
	}
	if free := st.DBSize - st.DBSizeInUse; float64(free) >= float64(st.DBSize)*c.FreePercent/100 {
		return ReasonFree, true
	}
	if ms.floor > 0 && float64(st.DBSizeInUse) >= float64(ms.floor)*(1+c.GrowthPercent/100) && ms.steady(c.PlateauRounds) {
		return ReasonGrowth, true
	}
	return "", false
}

// Defragmenter defragments etcd's members while this replica leads.
type Defragmenter struct {
	cfg    Config
	store  nodestore.Defragmentation
	leader Leader
	lg     *zap.Logger
	kick   chan struct{}

	// member is what this leadership knows of each member; only Run's
	// goroutine touches it.
	member map[uint64]*memberState

	rounds    *prometheus.CounterVec
	seconds   prometheus.Histogram
	reclaimed prometheus.Counter
}

// New returns a defragmenter; reg may be nil, and so may store when it
// cannot defragment (an in-memory store has no nodestore.Maintenance): Run
// then does nothing.
func New(cfg Config, store nodestore.Defragmentation, leader Leader, lg *zap.Logger, reg prometheus.Registerer) (*Defragmenter, error) {
	if cfg.Enabled {
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	d := &Defragmenter{cfg: cfg, store: store, leader: leader, lg: lg.Named("defrag"),
		kick:   make(chan struct{}, 1),
		member: map[uint64]*memberState{},
		rounds: metric.CounterVec(MetricDefrags,
			"etcd member defragmentations by the leading monitor, by result: defragmented, error.",
			"result"),
		// A plain histogram (no labels), which package metric does not build.
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricDefragSeconds,
			Help:    "How long one etcd member was blocked defragmenting.",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}}),
		reclaimed: metric.Counter(MetricReclaimed,
			"Bytes of etcd database file the leading monitor's defragmentations gave back."),
	}
	for _, r := range []string{ResultDefragmented, ResultError} {
		d.rounds.WithLabelValues(r)
	}
	if err := metric.Register(reg, d.rounds, d.seconds, d.reclaimed); err != nil {
		return nil, fmt.Errorf("register defrag metrics: %w", err)
	}
	return d, nil
}

// Compacted tells the defragmenter a compaction was committed; it looks at
// the members Settle later. It never blocks (the compactor calls it).
func (d *Defragmenter) Compacted() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// Run looks at the members after each compaction while this replica leads,
// until ctx ends. It only returns when ctx ends, also when disabled.
func (d *Defragmenter) Run(ctx context.Context) error {
	if d.store == nil || !d.cfg.Enabled {
		if d.store != nil {
			d.lg.Info("automatic etcd defragmentation disabled (--etcd.defrag=false): defragment members by hand (docs/operations.md)")
		}
		<-ctx.Done() // returning would stop the monitor (run.Group)
		return nil
	}
	var led <-chan struct{} // the leadership the member states belong to
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-d.kick:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-d.cfg.After(d.cfg.Settle):
		}
		_, done, ok := d.leader.Leadership()
		if !ok {
			continue
		}
		if done != led {
			// A new leadership starts from nothing: what an earlier one
			// knew may be stale (another replica may have defragmented).
			led = done
			d.member = map[uint64]*memberState{}
		}
		// A round ends with the leadership: a deposed leader must not go on
		// stopping members its successor may be defragmenting too.
		lctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-done:
			case <-lctx.Done():
			}
			cancel()
		}()
		d.round(lctx)
		cancel()
	}
}

type candidate struct {
	m      nodestore.Member
	st     nodestore.MemberStatus
	reason string
}

// round defragments the members that are due, followers first.
func (d *Defragmenter) round(ctx context.Context) {
	members, err := d.store.Members(ctx)
	if err != nil {
		if ctx.Err() == nil {
			d.lg.Warn("cannot list etcd members; defragmentation postponed to the next compaction", zap.Error(err))
		}
		return
	}
	now := d.cfg.Now()
	var due []candidate
	seen := map[uint64]bool{}
	for _, m := range members {
		seen[m.ID] = true
	}
	for id := range d.member {
		if !seen[id] {
			delete(d.member, id) // removed from the cluster
		}
	}
	for _, m := range members {
		st, err := d.store.MemberStatus(ctx, m.Endpoint)
		if err != nil {
			if ctx.Err() == nil {
				d.lg.Warn("cannot read an etcd member's status; not defragmenting it this round", zap.String("member", m.Name), zap.String("endpoint", m.Endpoint), zap.Error(err))
			}
			continue
		}
		ms := d.member[m.ID]
		if ms == nil {
			ms = &memberState{}
			d.member[m.ID] = ms
		}
		ms.look(st.DBSizeInUse, d.cfg.PlateauRounds)
		reason, ok := d.cfg.due(st, *ms, now)
		d.lg.Debug("etcd member database", zap.String("member", m.Name), zap.Int64("dbSize", st.DBSize),
			zap.Int64("dbSizeInUse", st.DBSizeInUse), zap.Int64("floor", ms.floor), zap.Bool("due", ok))
		if ok {
			due = append(due, candidate{m: m, st: st, reason: reason})
		}
	}
	// The etcd leader last: while a follower defragments the cluster keeps
	// its quorum and its leader; the leader's turn costs one election at
	// worst, and then only once.
	sort.SliceStable(due, func(i, j int) bool {
		return due[i].st.Leader != due[i].m.ID && due[j].st.Leader == due[j].m.ID
	})
	for i, c := range due {
		if i > 0 {
			select {
			case <-ctx.Done():
				return
			case <-d.cfg.After(d.cfg.Pause):
			}
		}
		if ctx.Err() != nil {
			return
		}
		d.defragment(ctx, c)
	}
}

func (d *Defragmenter) defragment(ctx context.Context, c candidate) {
	log := d.lg.With(zap.String("member", c.m.Name), zap.String("endpoint", c.m.Endpoint), zap.String("reason", c.reason))
	log.Info("defragmenting etcd member; it serves nothing until done", zap.Int64("dbSize", c.st.DBSize), zap.Int64("dbSizeInUse", c.st.DBSizeInUse))
	dctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	start := time.Now()
	err := d.store.Defragment(dctx, c.m.Endpoint)
	took := time.Since(start)
	cancel()
	ms := d.member[c.m.ID]
	// Also after a failure: a member that could not finish should not be
	// stopped again at once.
	ms.last = d.cfg.Now()
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		d.rounds.WithLabelValues(ResultError).Inc()
		log.Warn("etcd defragmentation failed; retrying after the next compaction past --etcd.defrag-min-interval", zap.Duration("took", took), zap.Error(err))
		return
	}
	d.rounds.WithLabelValues(ResultDefragmented).Inc()
	d.seconds.Observe(took.Seconds())
	after, err := d.store.MemberStatus(ctx, c.m.Endpoint)
	if err != nil {
		log.Info("defragmented etcd member; its new size is unknown", zap.Duration("took", took), zap.Error(err))
		return
	}
	ms.floor, ms.recent = 0, ms.recent[:0]
	ms.look(after.DBSizeInUse, d.cfg.PlateauRounds)
	if gain := c.st.DBSize - after.DBSize; gain > 0 {
		d.reclaimed.Add(float64(gain))
	}
	log.Info("defragmented etcd member", zap.Duration("took", took), zap.Int64("dbSizeBefore", c.st.DBSize),
		zap.Int64("dbSizeAfter", after.DBSize), zap.Int64("dbSizeInUseAfter", after.DBSizeInUse))
}

// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nodepulse/nodepulse/tests/procutil"
	"github.com/nodepulse/nodepulse/tests/promtext"
)

// point is what one instant of a run looks like from outside: each
// collector's process figures and counters, etcd's write counters and the
// monitors' transitions to Unknown.
type point struct {
	at         time.Time
	collectors []collectorPoint
	etcdTxns   float64 // etcd_server_proposals_committed_total (the same on every member)
	etcdWAL    float64 // etcd_disk_wal_write_bytes_total of the first member
	etcdDB     float64 // etcd_mvcc_db_total_size_in_bytes of the first member
	unknown    float64 // Ready → Unknown transitions counted by every monitor, summed
}

type collectorPoint struct {
	up       bool
	cpu      float64 // utime+stime, seconds
	rss      int64   // bytes
	renewals float64 // nodepulse_collector_messages_total{kind="lease",result="ok"}
	streams  float64 // nodepulse_collector_streams_open
}

// window is the measurement of one stage: from a to b.
type window struct {
	name string
	a, b point
}

func (s *stack) scrape(ctx context.Context, url string) promtext.Samples {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m, err := promtext.Scrape(ctx, http.DefaultClient, url)
	if err != nil {
		return nil
	}
	return m
}

// measure reads every collector's /proc figures and /metrics, etcd's and
// the monitors' /metrics.
func (s *stack) measure(ctx context.Context) point {
	p := point{at: time.Now()}
	for i, c := range s.collectors {
		var cp collectorPoint
		if c != nil && !c.Exited() {
			if ps, err := procutil.Sample(c.Pid()); err == nil {
				cp.up, cp.cpu, cp.rss = true, ps.CPUSeconds, ps.RSSBytes
			}
			m := s.scrape(ctx, "http://"+addr(s.adminPort(i))+"/metrics")
			cp.renewals = m.Sum("nodepulse_collector_messages_total", `kind="lease",result="ok"`)
			cp.streams = m.Sum("nodepulse_collector_streams_open")
		}
		p.collectors = append(p.collectors, cp)
	}
	e := s.scrape(ctx, "http://"+addr(s.cfg.basePort)+"/metrics")
	p.etcdTxns = e.Sum("etcd_server_proposals_committed_total")
	p.etcdWAL = e.Sum("etcd_disk_wal_write_bytes_total")
	p.etcdDB = e.Sum("etcd_mvcc_db_total_size_in_bytes")
	for i := range s.cfg.monitors {
		m := s.scrape(ctx, "http://"+addr(s.cfg.basePort+40+i)+"/metrics")
		p.unknown += m.Sum("nodepulse_monitor_ready_transitions_total", `to="Unknown"`)
	}
	return p
}

// hold samples nodes per collector every second for d (until), measuring
// the window around it.
func (s *stack) hold(ctx context.Context, name string, d time.Duration) (window, error) {
	w := window{name: name, a: s.measure(ctx)}
	if _, err := s.until(ctx, name, d, nil); err != nil {
		return w, err
	}
	w.b = s.measure(ctx)
	return w, nil
}

// table renders the windows: per collector CPU per renewal and RSS per
// attached node, and the cluster's etcd writes.
func table(ws []window) string {
	var b strings.Builder
	b.WriteString("| stage | collectors up | nodes per collector | renewals/s | CPU per renewal (ms), per collector | RSS per node (KiB), per collector | etcd Txns/s | etcd WAL B/s | etcd db MiB | Unknown transitions |\n")
	b.WriteString("|---|---:|---|---:|---|---|---:|---:|---:|---:|\n")
	for _, w := range ws {
		secs := w.b.at.Sub(w.a.at).Seconds()
		var up int
		var nodes, cpuPer, rssPer []string
		renewals := 0.0
		for i := range w.b.collectors {
			ca, cb := w.a.collectors[i], w.b.collectors[i]
			if !ca.up || !cb.up || cb.cpu < ca.cpu {
				continue // down, or restarted within the window
			}
			up++
			dr := cb.renewals - ca.renewals
			renewals += dr
			nodes = append(nodes, fmt.Sprintf("%.0f", cb.streams))
			if dr > 0 {
				cpuPer = append(cpuPer, fmt.Sprintf("%.3f", (cb.cpu-ca.cpu)/dr*1000))
			} else {
				cpuPer = append(cpuPer, "–")
			}
			if cb.streams > 0 {
				rssPer = append(rssPer, fmt.Sprintf("%.1f", float64(cb.rss)/1024/cb.streams))
			} else {
				rssPer = append(rssPer, "–")
			}
		}
		fmt.Fprintf(&b, "| %s (%.0f s) | %d | %s | %.0f | %s | %s | %.1f | %.0f | %.1f | %.0f |\n", w.name, secs, up,
			strings.Join(nodes, " / "), renewals/secs, strings.Join(cpuPer, " / "), strings.Join(rssPer, " / "),
			(w.b.etcdTxns-w.a.etcdTxns)/secs, (w.b.etcdWAL-w.a.etcdWAL)/secs, w.b.etcdDB/(1<<20), w.b.unknown-w.a.unknown)
	}
	return b.String()
}

// writeTable writes the windows to results.md and returns the table.
func (s *stack) writeTable(ws []window) (string, error) {
	t := table(ws)
	head := fmt.Sprintf("scaleout: %d nodes, one connection each, %d collectors, %d monitors, etcd ×3; %s; load average %s\n\n",
		s.cfg.nodes, s.cfg.collectors, s.cfg.monitors, procutil.CPUModel(), procutil.LoadAvg())
	return t, os.WriteFile(filepath.Join(s.cfg.out, "results.md"), []byte(head+t), 0o644)
}

// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package fleetsim

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Fault is one line of a fault script:
//
//	[at <offset>] stop <K|fraction|name>              crash nodes (stream cut, no Leaving)
//	[at <offset>] start <K|fraction|name|all>         bring stopped nodes back
//	[at <offset>] flap <K|fraction|name> every <d> [for <d>]  alternate stop/start
//	[at <offset>] memory-pressure <K|fraction|name> [for <d>] report MemoryPressure=True
//	[at <offset>] partition <K|fraction|name> [for <d>]  stop sending, keep streams open
//	[at <offset>] clock <±d> [for <d>]                 step every node's clock by d
//
// A target is a count (10), a fraction of the fleet (0.1 or 10%) or a node
// name. Offsets count from the start of the simulation (script) or from
// now (control API). Without "for", the effect lasts until undone.
type Fault struct {
	At     time.Duration
	Action string
	Target string
	Every  time.Duration
	For    time.Duration
	Line   string
}

var actions = map[string]bool{"stop": true, "start": true, "flap": true, "memory-pressure": true, "partition": true, "clock": true}

// ParseScript reads fault lines separated by newlines or ';'. Blank lines
// and '#' comments are ignored.
func ParseScript(text string) ([]Fault, error) {
	var out []Fault
	for _, line := range strings.FieldsFunc(text, func(r rune) bool { return r == '\n' || r == ';' }) {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f, err := parseFault(line)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

func parseFault(line string) (Fault, error) {
	w := strings.Fields(line)
	f := Fault{Line: line}
	bad := func(why string) (Fault, error) { return Fault{}, fmt.Errorf("fault %q: %s", line, why) }
	dur := func(i int) (time.Duration, error) {
		if i >= len(w) {
			return 0, fmt.Errorf("missing duration after %q", w[i-1])
		}
		d, err := time.ParseDuration(w[i])
		if err != nil || d < 0 {
			return 0, fmt.Errorf("bad duration %q", w[i])
		}
		return d, nil
	}
	if len(w) > 0 && w[0] == "at" {
		d, err := dur(1)
		if err != nil {
			return bad(err.Error())
		}
		f.At, w = d, w[2:]
	}
	if len(w) < 2 {
		return bad("want <action> <target>")
	}
	if !actions[w[0]] {
		return bad("unknown action " + w[0] + " (stop, start, flap, memory-pressure, partition, clock)")
	}
	if w[0] == "clock" {
		if _, err := time.ParseDuration(w[1]); err != nil {
			return bad("clock wants a step such as +3s or -2s")
		}
	}
	f.Action, f.Target = w[0], w[1]
	for i := 2; i < len(w); i += 2 {
		d, err := dur(i + 1)
		if err != nil {
			return bad(err.Error())
		}
		switch w[i] {
		case "every":
			f.Every = d
		case "for":
			f.For = d
		default:
			return bad("unexpected " + w[i])
		}
	}
	if f.Action == "flap" && f.Every <= 0 {
		return bad("flap needs 'every <duration>'")
	}
	return f, nil
}

// pick chooses nodes for target among those matching eligible.
func (s *Simulator) pick(target string, eligible func(flags uint32) bool) ([]int, error) {
	if target == "all" {
		target = "100%"
	}
	var k int
	if strings.HasPrefix(target, s.cfg.NamePrefix) {
		i, err := strconv.Atoi(strings.TrimPrefix(target, s.cfg.NamePrefix))
		if err != nil || i < 0 || i >= len(s.nodes) || s.Name(i) != target {
			return nil, fmt.Errorf("no node named %q", target)
		}
		return []int{i}, nil
	}
	if pct, ok := strings.CutSuffix(target, "%"); ok {
		f, err := strconv.ParseFloat(pct, 64)
		if err != nil || f < 0 || f > 100 {
			return nil, fmt.Errorf("bad percentage %q", target)
		}
		k = int(f / 100 * float64(len(s.nodes)))
	} else if strings.Contains(target, ".") {
		f, err := strconv.ParseFloat(target, 64)
		if err != nil || f < 0 || f > 1 {
			return nil, fmt.Errorf("bad fraction %q", target)
		}
		k = int(f * float64(len(s.nodes)))
	} else {
		n, err := strconv.Atoi(target)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("bad target %q: want a count, a fraction, a percentage or a node name", target)
		}
		k = n
	}
	var cand []int
	for i := range s.nodes {
		if eligible(s.nodes[i].flags.Load()) {
			cand = append(cand, i)
		}
	}
	rand.Shuffle(len(cand), func(a, b int) { cand[a], cand[b] = cand[b], cand[a] })
	if k > len(cand) {
		k = len(cand)
	}
	return cand[:k], nil
}

// Apply executes one fault now (its At is ignored); effects with For are
// undone by a timer bound to ctx.
func (s *Simulator) Apply(ctx context.Context, f Fault) (int, error) {
	if f.Action == "clock" {
		return s.stepClock(ctx, f)
	}
	notStopped := func(fl uint32) bool { return fl&flagStopped == 0 }
	var nodes []int
	var err error
	switch f.Action {
	case "start":
		nodes, err = s.pick(f.Target, func(fl uint32) bool { return fl&flagStopped != 0 })
	default:
		nodes, err = s.pick(f.Target, notStopped)
	}
	if err != nil {
		return 0, err
	}
	s.lg.Info("fault", zap.String("fault", f.Line), zap.Int("nodes", len(nodes)))
	undo := func(fn func()) {
		if f.For > 0 {
			go func() {
				select {
				case <-ctx.Done():
				case <-time.After(f.For):
					fn()
				}
			}()
		}
	}
	switch f.Action {
	case "stop":
		for _, i := range nodes {
			s.stopNode(i)
		}
		undo(func() { s.startAll(nodes) })
	case "start":
		s.startAll(nodes)
	case "flap":
		go s.flap(ctx, nodes, f.Every, f.For)
	case "memory-pressure":
		s.setPressure(nodes, true)
		undo(func() { s.setPressure(nodes, false) })
	case "partition":
		for _, i := range nodes {
			setFlag(&s.nodes[i].flags, flagPartitioned, true)
		}
		undo(func() {
			for _, i := range nodes {
				setFlag(&s.nodes[i].flags, flagPartitioned, false)
			}
		})
	}
	return len(nodes), nil
}

// stepClock steps the clock of every node of the simulator by the fault's
// target (a signed duration), and back after For if set. Only the times
// the nodes put in their messages move; their schedule does not, as a
// stepped wall clock leaves a reporter's monotonic timers alone.
func (s *Simulator) stepClock(ctx context.Context, f Fault) (int, error) {
	d, err := time.ParseDuration(f.Target)
	if err != nil {
		return 0, fmt.Errorf("clock step %q: %w", f.Target, err)
	}
	s.clockOffset.Add(int64(d))
	s.lg.Info("fault", zap.String("fault", f.Line), zap.Duration("clock_offset", time.Duration(s.clockOffset.Load())))
	if f.For > 0 {
		go func() {
			select {
			case <-ctx.Done():
			case <-time.After(f.For):
				s.clockOffset.Add(-int64(d))
			}
		}()
	}
	return len(s.nodes), nil
}

func (s *Simulator) startAll(nodes []int) {
	for _, i := range nodes {
		s.startNode(i)
	}
}

func (s *Simulator) setPressure(nodes []int, on bool) {
	for _, i := range nodes {
		setFlag(&s.nodes[i].flags, flagMemPressure, on)
		s.connOf(i).post(event{kind: evStatusNow, node: int32(i)})
	}
}

func (s *Simulator) flap(ctx context.Context, nodes []int, every, total time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	var end <-chan time.Time
	if total > 0 {
		end = time.After(total)
	}
	down := false
	for {
		if down {
			s.startAll(nodes)
		} else {
			for _, i := range nodes {
				s.stopNode(i)
			}
		}
		down = !down
		select {
		case <-ctx.Done():
			return
		case <-end:
			s.startAll(nodes)
			return
		case <-t.C:
		}
	}
}

// runFaults plays a script, each fault at its offset from now.
func (s *Simulator) runFaults(ctx context.Context, faults []Fault) {
	start := time.Now()
	for _, f := range faults {
		go func() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(start.Add(f.At))):
			}
			if _, err := s.Apply(ctx, f); err != nil {
				s.lg.Warn("fault failed", zap.String("fault", f.Line), zap.Error(err))
			}
		}()
	}
}

// ServeControl serves the control API on ln until ctx is done:
//
//	POST /faults   body: fault script lines, run relative to now
//	GET  /stats    node counts by state
func (s *Simulator) ServeControl(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /faults", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		faults, err := ParseScript(string(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, f := range faults {
			if f.At > 0 {
				s.runFaults(ctx, []Fault{f})
				fmt.Fprintf(w, "%s: scheduled in %s\n", f.Line, f.At)
				continue
			}
			n, err := s.Apply(ctx, f)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			fmt.Fprintf(w, "%s: %d nodes\n", f.Line, n)
		}
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		st := s.Stats()
		fmt.Fprintf(w, "nodes %d\nconnected %d\nstopped %d\npartitioned %d\nmemory_pressure %d\n",
			st.Nodes, st.Connected, st.Stopped, st.Partitioned, st.MemPressure)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	s.lg.Info("simulator control API listening", zap.String("address", ln.Addr().String()))
	if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
		return fmt.Errorf("control API: %w", err)
	}
	return nil
}

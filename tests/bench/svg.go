// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package bench

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// Chart renders the run's timeline as a self-contained SVG: renewals/s,
// renewal ack p99 and node states over time, with the stages marked.
func Chart(r *Report) string {
	const (
		W, left, right = 1000.0, 70.0, 20.0
		panelH, gap    = 170.0, 45.0
		top            = 40.0
	)
	pw := W - left - right
	var b strings.Builder
	H := top + 3*panelH + 2*gap + 45
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="11">`+"\n", W, H, W, H)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", left, html.EscapeString("nodepulse scale benchmark — "+r.Title))
	tl := r.Timeline
	tmax := 1.0
	if len(tl) > 0 {
		tmax = math.Max(tl[len(tl)-1].T, 1)
	}
	x := func(t float64) float64 { return left + t/tmax*pw }

	type series struct {
		name  string
		color string
		get   func(p TimelinePoint) float64
	}
	panel := func(i int, title, unit string, ss []series, logScale bool) {
		y0 := top + float64(i)*(panelH+gap)
		ymax := 0.0
		ymin := math.Inf(1)
		for _, s := range ss {
			for _, p := range tl {
				v := s.get(p)
				if math.IsNaN(v) || math.IsInf(v, 0) {
					continue
				}
				ymax = math.Max(ymax, v)
				if v > 0 {
					ymin = math.Min(ymin, v)
				}
			}
		}
		if ymax <= 0 {
			ymax = 1
		}
		ymax = niceCeil(ymax * 1.05)
		lo := 0.0
		if logScale {
			if math.IsInf(ymin, 1) {
				ymin = ymax / 10
			}
			lo = math.Pow(10, math.Floor(math.Log10(ymin)))
			ymax = math.Pow(10, math.Ceil(math.Log10(ymax)))
			if lo >= ymax {
				lo = ymax / 10
			}
		}
		y := func(v float64) float64 {
			if logScale {
				v = math.Max(v, lo)
				return y0 + panelH - (math.Log10(v)-math.Log10(lo))/(math.Log10(ymax)-math.Log10(lo))*panelH
			}
			return y0 + panelH - v/ymax*panelH
		}
		fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-weight="bold">%s</text>`+"\n", left, y0-8, html.EscapeString(title))
		fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`+"\n", left, y0, pw, panelH)
		// y grid
		var ticks []float64
		if logScale {
			for v := lo; v <= ymax*1.0001; v *= 10 {
				ticks = append(ticks, v)
			}
		} else {
			for k := 0; k <= 4; k++ {
				ticks = append(ticks, ymax*float64(k)/4)
			}
		}
		for _, v := range ticks {
			yy := y(v)
			fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#eee"/>`+"\n", left, yy, left+pw, yy)
			fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-4, yy+4, html.EscapeString(tick(v, unit)))
		}
		// stage markers
		for _, m := range r.Markers {
			xx := x(m.T)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#888" stroke-dasharray="4,3"/>`+"\n", xx, y0, xx, y0+panelH)
			if i == 0 {
				fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" fill="#555">%s</text>`+"\n", xx+3, y0+12, html.EscapeString(m.Label))
			}
		}
		if i == 1 {
			// The GC cycles of the processes on a renewal's path, as a
			// strip along the bottom: the ack tail lines up with them.
			colors := map[string]string{"collector": "#e377c2", "sim": "#17becf", "sim-kill": "#17becf"}
			cycles := r.gcCycles()
			for _, c := range cycles {
				col, ok := colors[c.Role]
				if !ok {
					continue
				}
				x0 := x(c.Start)
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.0f" width="%.1f" height="8" fill="%s" fill-opacity="0.8"><title>%s GC %s</title></rect>`+"\n",
					x0, y0+panelH-8, math.Max(x(c.End())-x0, 1.5), col, html.EscapeString(c.Role), fdur(c.Seconds))
			}
			if len(cycles) > 0 {
				fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" fill="#e377c2">GC: collector</text>`+"\n", left+6, y0+panelH-12)
				fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" fill="#17becf">GC: load generator</text>`+"\n", left+90, y0+panelH-12)
			}
		}
		// series
		lx := left + pw - 10
		for si, s := range ss {
			var path strings.Builder
			pen := false
			for _, p := range tl {
				v := s.get(p)
				if math.IsNaN(v) || math.IsInf(v, 0) || (logScale && v <= 0) {
					pen = false
					continue
				}
				cmd := "L"
				if !pen {
					cmd = "M"
				}
				fmt.Fprintf(&path, "%s%.1f,%.1f ", cmd, x(p.T), y(v))
				pen = true
			}
			if path.Len() > 0 {
				fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.3"/>`+"\n", strings.TrimSpace(path.String()), s.color)
			}
			fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="end" fill="%s">%s</text>`+"\n", lx, y0+14+float64(si)*13, s.color, html.EscapeString(s.name))
		}
	}
	panel(0, "renewals per second (nodepulse: seen on the collector's feed; baseline: Lease Txns committed)", "", []series{
		{"renewals/s", "#1f77b4", func(p TimelinePoint) float64 { return p.RenewalsPS }},
	}, false)
	panel(1, "renewal ack latency p99 per sample (log scale)", "s", []series{
		{"ack p99", "#d62728", func(p TimelinePoint) float64 { return p.AckP99 }},
	}, true)
	panel(2, "nodes as the monitor serves them, and attached to the collector", "", []series{
		{"attached", "#7f7f7f", func(p TimelinePoint) float64 { return float64(p.Attached) }},
		{"Ready", "#2ca02c", func(p TimelinePoint) float64 { return float64(p.Ready) }},
		{"Unknown", "#ff7f0e", func(p TimelinePoint) float64 { return float64(p.Unknown) }},
	}, false)
	// x axis
	yAxis := top + 3*panelH + 2*gap
	step := niceCeil(tmax / 10)
	for t := 0.0; t <= tmax; t += step {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", x(t), yAxis+15, fmt.Sprintf("%.0fs", t))
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" text-anchor="middle">time since start</text>`+"\n", left+pw/2, yAxis+32)
	b.WriteString("</svg>\n")
	return b.String()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v*(1-1e-9) {
			return m * p
		}
	}
	return 10 * p
}

func tick(v float64, unit string) string {
	if unit == "s" {
		switch {
		case v < 1e-3:
			return fmt.Sprintf("%gµs", math.Round(v*1e6*10)/10)
		case v < 1:
			return fmt.Sprintf("%gms", math.Round(v*1e3*10)/10)
		default:
			return fmt.Sprintf("%gs", v)
		}
	}
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%gk", v/1e3)
	default:
		return fmt.Sprintf("%g", math.Round(v*100)/100)
	}
}

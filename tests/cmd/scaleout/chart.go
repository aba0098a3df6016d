// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// chartRows is the height of the text chart; its width is one column per
// sample, at most chartCols (samples are then merged, keeping the last).
const (
	chartRows = 20
	chartCols = 120
)

// writeChart draws nodes per collector over time as text (chart.txt): one
// digit per collector (1, 2, 3 …), '*' where several meet, the events
// marked below the time axis.
func (s *stack) writeChart() error {
	n := len(s.rows)
	if n == 0 {
		return nil
	}
	step := (n + chartCols - 1) / chartCols
	cols := (n + step - 1) / step
	top := 1
	for _, r := range s.rows {
		for _, v := range r {
			top = max(top, v)
		}
	}
	grid := make([][]byte, chartRows)
	for i := range grid {
		grid[i] = []byte(strings.Repeat(" ", cols))
	}
	events := []byte(strings.Repeat(" ", cols))
	for c := range cols {
		i := min(n-1, c*step+step-1)
		for k, v := range s.rows[i] {
			y := chartRows - 1 - v*(chartRows-1)/top
			if grid[y][c] == ' ' {
				grid[y][c] = byte('1' + k)
			} else {
				grid[y][c] = '*'
			}
		}
		for j := c * step; j < min(n, (c+1)*step); j++ {
			if j < len(s.marks) && s.marks[j] != "" {
				events[c] = '^'
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "nodes per collector (1..%d) over %.0f s, one column per %d samples (about a second each); ^ = event\n", len(s.collectors), s.times[n-1], step)
	for y, line := range grid {
		label := ""
		if y == 0 || y == chartRows-1 || y == chartRows/2 {
			label = fmt.Sprint(top * (chartRows - 1 - y) / (chartRows - 1))
		}
		fmt.Fprintf(&b, "%7s |%s\n", label, line)
	}
	fmt.Fprintf(&b, "%7s +%s\n%7s  %s\n", "", strings.Repeat("-", cols), "", events)
	for j, m := range s.marks {
		if m != "" {
			fmt.Fprintf(&b, "  %6.0f s: %s\n", s.times[min(j, len(s.times)-1)], m)
		}
	}
	path := filepath.Join(s.cfg.out, "chart.txt")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return err
	}
	fmt.Fprint(s.log, b.String())
	fmt.Fprintf(s.log, "wrote %s and %s\n", filepath.Join(s.cfg.out, "nodes.csv"), path)
	return nil
}

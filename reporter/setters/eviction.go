// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package setters

import (
	"fmt"
	"math/big"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodepulse/nodepulse/services/validation"
)

// Eviction signals the reporter understands (kubelet names).
const (
	SignalMemoryAvailable     = "memory.available"
	SignalNodeFSAvailable     = "nodefs.available"
	SignalNodeFSInodesFree    = "nodefs.inodesFree"
	SignalImageFSAvailable    = "imagefs.available"
	SignalImageFSInodesFree   = "imagefs.inodesFree"
	SignalPIDAvailable        = "pid.available"
	DefaultEvictionHard       = "memory.available<100Mi,nodefs.available<10%,nodefs.inodesFree<5%,imagefs.available<15%,imagefs.inodesFree<5%"
	DefaultPressureHoldPeriod = 5 * time.Minute
)

var knownSignals = map[string]bool{
	SignalMemoryAvailable: true, SignalNodeFSAvailable: true, SignalNodeFSInodesFree: true,
	SignalImageFSAvailable: true, SignalImageFSInodesFree: true, SignalPIDAvailable: true,
}

// Threshold is one hard eviction threshold "signal<value": either an absolute
// quantity or a fraction of the signal's capacity.
type Threshold struct {
	Signal string
	// Quantity is the absolute amount; used when Fraction is nil.
	Quantity resource.Quantity
	// Fraction of capacity in (0, 1], exact ("10%" is 1/10, not 0.1 in
	// binary floating point, so 10% of 100Gi is exactly 10Gi).
	Fraction *big.Rat
}

// Thresholds is the set of hard eviction thresholds, keyed by signal.
type Thresholds map[string]Threshold

// ParseThresholds reads the kubelet --eviction-hard syntax
// ("memory.available<100Mi,nodefs.available<10%"). As upstream, the value
// given replaces the defaults entirely: a signal left out has no threshold.
// An empty string means no thresholds at all.
func ParseThresholds(s string) (Thresholds, error) {
	out := Thresholds{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		sig, val, ok := strings.Cut(part, "<")
		if !ok {
			return nil, fmt.Errorf("eviction threshold %q: want signal<value (only \"<\" is supported)", part)
		}
		sig, val = strings.TrimSpace(sig), strings.TrimSpace(val)
		if !knownSignals[sig] {
			return nil, fmt.Errorf("eviction threshold %q: unknown signal %q (known: %s)", part, sig, strings.Join(sortedKeys(knownSignals), ", "))
		}
		if _, dup := out[sig]; dup {
			return nil, fmt.Errorf("eviction threshold %q: signal %s given twice", part, sig)
		}
		t := Threshold{Signal: sig}
		if pct, isPct := strings.CutSuffix(val, "%"); isPct {
			f, ok := new(big.Rat).SetString(pct)
			if !ok || f.Sign() <= 0 || f.Cmp(big.NewRat(100, 1)) > 0 {
				return nil, fmt.Errorf("eviction threshold %q: percentage must be in (0%%, 100%%]", part)
			}
			t.Fraction = f.Quo(f, big.NewRat(100, 1))
		} else {
			q, err := validation.ParseQuantity(val)
			if err != nil {
				return nil, fmt.Errorf("eviction threshold %q: %w", part, err)
			}
			if q.Sign() < 0 {
				return nil, fmt.Errorf("eviction threshold %q: negative quantity", part)
			}
			t.Quantity = q
		}
		out[sig] = t
	}
	return out, nil
}

// String renders the thresholds in flag syntax, sorted by signal.
func (t Thresholds) String() string {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		th := t[k]
		if th.Fraction != nil {
			pct := new(big.Rat).Mul(th.Fraction, big.NewRat(100, 1))
			parts[i] = k + "<" + strings.TrimSuffix(strings.TrimRight(pct.FloatString(6), "0"), ".") + "%"
		} else {
			parts[i] = k + "<" + th.Quantity.String()
		}
	}
	return strings.Join(parts, ",")
}

// amount returns the threshold as an absolute amount against capacity.
func (th Threshold) amount(capacity int64) resource.Quantity {
	if th.Fraction != nil {
		// Whole bytes, as Kubernetes computes percentage thresholds: a
		// fraction of a byte would surface in allocatable as a milli-byte
		// quantity ("243497856614400m"). Rounding the reservation up keeps
		// allocatable on the safe side.
		p := new(big.Int).Mul(big.NewInt(capacity), th.Fraction.Num())
		n, rem := new(big.Int).QuoRem(p, th.Fraction.Denom(), new(big.Int))
		if rem.Sign() > 0 {
			n.Add(n, big.NewInt(1))
		}
		return *resource.NewQuantity(n.Int64(), resource.BinarySI)
	}
	return th.Quantity
}

// crossed reports whether available is below the threshold for signal sig,
// and false when the signal has no threshold or its numbers are unknown.
func (t Thresholds) crossed(sig string, available, capacity int64, known bool) bool {
	th, ok := t[sig]
	if !ok || !known {
		return false
	}
	return resource.NewQuantity(available, resource.BinarySI).Cmp(th.amount(capacity)) < 0
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// PressureHold keeps a pressure condition True for a hold-down period after
// its threshold was last crossed (the kubelet's
// evictionPressureTransitionPeriod, default 5m), so a node hovering around a
// threshold does not flap its condition and taint every few seconds.
type PressureHold struct {
	// Period of the hold-down; zero disables it.
	Period time.Duration
	last   map[string]time.Time
}

// Observe records whether cond's threshold is crossed at now and returns
// whether the condition is under pressure (crossed now, or within Period of
// the last crossing).
func (h *PressureHold) Observe(now time.Time, cond string, crossed bool) bool {
	if h.last == nil {
		h.last = map[string]time.Time{}
	}
	if crossed {
		h.last[cond] = now
		return true
	}
	last, ok := h.last[cond]
	return ok && now.Sub(last) < h.Period
}

// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package lifecycle

import (
	"errors"
	"fmt"
	"time"
)

// Config holds the tunables of the lifecycle rules, named after the
// kube-controller-manager flags they mirror.
type Config struct {
	// GracePeriod (--node-monitor-grace-period) is how long a node that has
	// reported Ready may go without any heartbeat (lease renewal on a feed or
	// in etcd, or a status heartbeat) before its conditions become Unknown.
	// It must be several times the reporters' lease renew interval (default
	// 10s): with 40s a node has to miss about four renewals in a row, which
	// rides out a collector failover and a slow etcd commit. nodepulse keeps
	// the Kubernetes ≤1.31 default of 40s; Kubernetes ≥1.32 uses 50s
	// (kubernetes/kubernetes#126287) to tolerate one more missed renewal.
	GracePeriod time.Duration
	// StartupGracePeriod (--node-startup-grace-period) replaces GracePeriod for
	// a node that has never reported a Ready condition, so a machine that is
	// still booting its reporter is not declared dead. Default 60s.
	StartupGracePeriod time.Duration
	// EvictionRate (--node-eviction-rate) is the NoExecute tainting rate, in
	// nodes per second per zone, for healthy zones and for fully disrupted
	// zones while other zones are healthy. Default 0.1 (one node per 10s).
	EvictionRate float64
	// SecondaryEvictionRate (--secondary-node-eviction-rate) is the rate in a
	// partially disrupted zone larger than LargeClusterSizeThreshold; smaller
	// zones stop tainting altogether. Default 0.01.
	SecondaryEvictionRate float64
	// UnhealthyZoneThreshold (--unhealthy-zone-threshold): a zone with at
	// least 3 not-ready nodes and at least this fraction not ready is
	// partially disrupted. Default 0.55.
	UnhealthyZoneThreshold float64
	// LargeClusterSizeThreshold (--large-cluster-size-threshold) is compared
	// with the zone's node count: only larger zones keep tainting (at
	// SecondaryEvictionRate) when partially disrupted. Default 50.
	LargeClusterSizeThreshold int
	// ClockSkewWarning (--clock-skew-warning): a node whose clock is
	// further than this from its collector's gets a NodeClockSkew warning
	// event, and a Normal NodeClockSkewResolved once it is back within
	// half of it. Only shown: liveness never depends on node clocks. 0
	// disables the events (the skew is still measured and exported).
	ClockSkewWarning time.Duration
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		GracePeriod:               40 * time.Second,
		StartupGracePeriod:        60 * time.Second,
		EvictionRate:              0.1,
		SecondaryEvictionRate:     0.01,
		UnhealthyZoneThreshold:    0.55,
		LargeClusterSizeThreshold: 50,
		ClockSkewWarning:          time.Minute,
	}
}

// Validate rejects settings the rules cannot work with.
func (c Config) Validate() error {
	var errs []error
	if c.GracePeriod <= 0 {
		errs = append(errs, fmt.Errorf("--node-monitor-grace-period must be positive, got %s", c.GracePeriod))
	}
	if c.StartupGracePeriod <= 0 {
		errs = append(errs, fmt.Errorf("--node-startup-grace-period must be positive, got %s", c.StartupGracePeriod))
	}
	if c.EvictionRate < 0 || c.SecondaryEvictionRate < 0 {
		errs = append(errs, errors.New("--node-eviction-rate and --secondary-node-eviction-rate must not be negative"))
	}
	if c.UnhealthyZoneThreshold <= 0 || c.UnhealthyZoneThreshold > 1 {
		errs = append(errs, fmt.Errorf("--unhealthy-zone-threshold must be in (0, 1], got %v", c.UnhealthyZoneThreshold))
	}
	if c.ClockSkewWarning < 0 {
		errs = append(errs, fmt.Errorf("--clock-skew-warning must not be negative (0 disables), got %s", c.ClockSkewWarning))
	}
	if c.LargeClusterSizeThreshold < 0 {
		errs = append(errs, fmt.Errorf("--large-cluster-size-threshold must not be negative, got %d", c.LargeClusterSizeThreshold))
	}
	return errors.Join(errs...)
}

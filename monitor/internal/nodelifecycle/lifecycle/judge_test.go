package lifecycle

import (
	"testing"
	"time"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// Health.Equal compares what a record says (overrides, taints, recovery
// time), not who wrote it when; no record equals an empty one.
func TestHealthEqual(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	unknown := func() *nodev1.NodeCondition {
		return &nodev1.NodeCondition{Type: nodemodel.Ready, Status: nodemodel.Unknown, Reason: nodemodel.ReasonNodeStatusUnknown}
	}
	taint := func(effect string) *nodev1.Taint {
		return &nodev1.Taint{Key: nodemodel.TaintUnreachable, Effect: effect}
	}
	full := func() *nodev1.NodeHealth {
		return &nodev1.NodeHealth{NodeName: "n", ConditionOverrides: []*nodev1.NodeCondition{unknown()},
			Taints: []*nodev1.Taint{taint(nodemodel.NoSchedule)}, RecoveryTime: nodemodel.Timestamp(t0)}
	}
	for _, c := range []struct {
		name string
		a, b *nodev1.NodeHealth
		want bool
	}{
		{"empty and none", &nodev1.NodeHealth{NodeName: "n"}, nil, true},
		{"something and none", full(), nil, false},
		{"equal values, other objects", full(), full(), true},
		{"writer and time differ", func() *nodev1.NodeHealth {
			h := full()
			h.Leader, h.UpdateTime = "b", nodemodel.Timestamp(t0.Add(time.Hour))
			return h
		}(), full(), true},
		{"one more taint", func() *nodev1.NodeHealth {
			h := full()
			h.Taints = append(h.Taints, taint(nodemodel.NoExecute))
			return h
		}(), full(), false},
		{"another override", func() *nodev1.NodeHealth {
			h := full()
			h.ConditionOverrides[0].Reason = nodemodel.ReasonNodeStatusNeverUpdated
			return h
		}(), full(), false},
		{"no recovery time", func() *nodev1.NodeHealth {
			h := full()
			h.RecoveryTime = nil
			return h
		}(), full(), false},
	} {
		if got := HealthOf(c.a).Equal(c.b); got != c.want {
			t.Errorf("%s: Equal = %v, want %v", c.name, got, c.want)
		}
	}
}

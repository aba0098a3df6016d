// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package controller

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// workingHealth carries every field of the stored record (a field added to
// NodeHealth must be added there too: this test then fails until it is).
func TestWorkingHealthCarriesEveryField(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	h := &nodev1.NodeHealth{NodeName: "n",
		ConditionOverrides: []*nodev1.NodeCondition{{Type: nodemodel.Ready, Status: nodemodel.Unknown}},
		Taints:             []*nodev1.Taint{{Key: nodemodel.TaintUnreachable, Effect: nodemodel.NoSchedule}},
		RecoveryTime:       nodemodel.Timestamp(t0), UpdateTime: nodemodel.Timestamp(t0), Leader: "a"}
	fields := h.ProtoReflect().Descriptor().Fields()
	for i := range fields.Len() {
		if !h.ProtoReflect().Has(fields.Get(i)) {
			t.Fatalf("the test record leaves %s unset", fields.Get(i).Name())
		}
	}
	w := workingHealth(h, "n")
	if w == h || !proto.Equal(w, h) {
		t.Fatalf("workingHealth = %v, want a new record equal to %v", w, h)
	}
}

// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package app

import (
	"context"

	"github.com/nodepulse/nodepulse/monitor/internal/api"
	"github.com/nodepulse/nodepulse/monitor/internal/nodelifecycle/controller"
	"github.com/nodepulse/nodepulse/services/nodestore"
)

// lifecycleView is the lifecycle controller as the API asks it
// (api.NodeLifecycle), so the API does not depend on the controller: the
// leader's facts about a node, and who leads.
type lifecycleView struct {
	ctl   *controller.Controller
	store nodestore.Store
}

// Facts converts the controller's facts; the two types have the same
// fields, so a change to one fails to compile here until the other follows.
func (v lifecycleView) Facts(name string, labels map[string]string) api.NodeFacts {
	return api.NodeFacts(v.ctl.Facts(name, labels))
}

func (v lifecycleView) Leader(ctx context.Context) string {
	leader, _ := v.store.Leader(ctx, controller.ElectionName)
	return leader
}

// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package heartbeat

import (
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
)

// The reporter as its node's kubelet (docs/spec.md, "The reporter as the
// node's kubelet"): the collector's PodSync messages go to the pod agent,
// whose decisions are sent on the stream as pod writes; each ack goes back
// to the agent, which decides again after its wait.

// nodeDeleted says whether the stream ended because the node object was
// deleted: the collector ends it with NotFound, and the reporter registers
// again at once (a new node object, a new uid).
func nodeDeleted(err error) bool {
	return status.Code(err) == codes.NotFound
}

// podSync applies a PodSync and sends what the agent decides.
func (s *session) podSync(m *collectorv1.PodSync) error {
	a := s.c.cfg.Pods
	if a == nil {
		return nil
	}
	a.Sync(m)
	return s.decidePods()
}

// podAcked hands a pod write's ack to the agent.
func (s *session) podAcked(p pending, ack *collectorv1.Ack) error {
	a := s.c.cfg.Pods
	if a == nil {
		return nil
	}
	a.Done(p.podKey, ack.GetError() == nil, time.Now())
	return s.decidePods()
}

// decidePods sends the agent's writes and sets the timer for its next
// wake.
func (s *session) decidePods() error {
	a := s.c.cfg.Pods
	if a == nil {
		return nil
	}
	now := time.Now()
	for _, act := range a.Decide(now) {
		s.c.lg.Info("pod write", zap.Stringer("action", act.Kind), zap.String("pod", act.Key))
		seq := s.sess.Stamp(act.Request)
		s.acks[seq] = pending{kind: "pod", sentAt: now, podKey: act.Key}
		if err := s.write("pod", act.Request); err != nil {
			return err
		}
	}
	if t, ok := a.NextWake(); ok {
		resetTimer(s.podT, max(0, t.Sub(now)))
	}
	return nil
}

// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package stream

import (
	"fmt"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// RegisterRequest is the first message of every stream: reg, numbered 1.
func RegisterRequest(reg *collectorv1.Register) *collectorv1.ReportRequest {
	return &collectorv1.ReportRequest{Seq: 1, Message: &collectorv1.ReportRequest_Register{Register: reg}}
}

// StatusRequest is a status report carrying st (numbered by Session.Stamp).
func StatusRequest(st *nodev1.NodeStatus) *collectorv1.ReportRequest {
	return &collectorv1.ReportRequest{Message: &collectorv1.ReportRequest_Status{Status: &collectorv1.StatusReport{Status: st}}}
}

// LeavingRequest says the node stops on purpose, so the collector can tell
// it from a crash (LEAVING, not DETACHED, on the feed).
func LeavingRequest(reason string) *collectorv1.ReportRequest {
	return &collectorv1.ReportRequest{Message: &collectorv1.ReportRequest_Leaving{Leaving: &collectorv1.Leaving{Reason: reason}}}
}

// RegisterReply is what a response received while waiting for the
// Register's ack means.
type RegisterReply struct {
	// Queued: the collector queued the Register (Command.register_queued)
	// and answers it within its estimate; the driver then waits Wait from
	// now instead of its register timeout, rather than give up and queue
	// again at the back.
	Queued bool
	Wait   time.Duration
	// Ack is the Register's ack (seq 1); nil for anything else, which
	// means nothing yet. Err is set when the ack refuses the node.
	Ack *collectorv1.Ack
	Err error
}

// ReadRegisterReply reads resp while the Register is unanswered.
func ReadRegisterReply(resp *collectorv1.ReportResponse, registerTimeout time.Duration) RegisterReply {
	if q := resp.GetCommand().GetRegisterQueued(); q != nil {
		return RegisterReply{Queued: true, Wait: QueuedWait(q.GetWithin().AsDuration(), registerTimeout)}
	}
	ack := resp.GetAck()
	if ack == nil || ack.GetSeq() != 1 {
		return RegisterReply{}
	}
	r := RegisterReply{Ack: ack}
	if e := ack.GetError(); e != nil {
		r.Err = fmt.Errorf("register refused: %s %s: %s", codes.Code(e.GetCode()), e.GetField(), e.GetMessage())
	}
	return r
}

// Session is the protocol state of one registered stream: the sequence
// numbers, the collector's renewal phase and slow-down, and whether the
// next renewal may be empty. Its owner (one goroutine) sends what it
// produces; it is small, because the simulator keeps one per virtual node.
type Session struct {
	seq                 uint64
	minLease, minStatus time.Duration
	// phase is the collector's renewal phase (Ack.renew_phase), when
	// hasPhase.
	phase    float64
	hasPhase bool
	// emptyOK: the collector takes empty renewals (Ack.empty_renewals);
	// leased: a LeaseRenewal went out on this stream, so the next renewal
	// may be empty.
	emptyOK, leased bool
}

// Open starts the session of a stream whose Register (seq 1) was accepted
// with ack. badPhase reports a renewal phase outside [0, 1), which is
// ignored: the node then renews on jittered intervals.
func Open(ack *collectorv1.Ack) (s Session, badPhase bool) {
	s.seq = 1
	s.emptyOK = ack.GetEmptyRenewals()
	if ack != nil && ack.RenewPhase != nil {
		if p := ack.GetRenewPhase(); p >= 0 && p < 1 {
			s.phase, s.hasPhase = p, true
		} else {
			badPhase = true
		}
	}
	return s, badPhase
}

// Seq is the number of the last message stamped.
func (s *Session) Seq() uint64 { return s.seq }

// Stamp numbers req as the stream's next message and returns its number.
// The empty renewal carries none: its number is implied, the previous
// one's plus one.
func (s *Session) Stamp(req *collectorv1.ReportRequest) uint64 {
	s.seq++
	if req != &emptyRenewal {
		req.Seq = s.seq
	}
	return s.seq
}

// emptyRenewal is the empty ReportRequest that renews a lease
// (collector.proto); never written to, it stays empty.
var emptyRenewal collectorv1.ReportRequest

// Renewal is the next lease renewal, to Stamp and send: an empty message
// once the stream carried a LeaseRenewal and the collector takes empty
// ones (the collector dates it on arrival and keeps the lease duration it
// was sent), else a LeaseRenewal dated now, written into buf when buf is
// one (a sender that renews for many nodes reuses one) or a new one.
func (s *Session) Renewal(now time.Time, leaseSeconds int32, buf *collectorv1.ReportRequest) *collectorv1.ReportRequest {
	if s.emptyOK && s.leased {
		return &emptyRenewal
	}
	l := buf.GetLease()
	if l == nil {
		l = &collectorv1.LeaseRenewal{}
		buf = &collectorv1.ReportRequest{Message: &collectorv1.ReportRequest_Lease{Lease: l}}
	}
	if l.RenewTime == nil {
		l.RenewTime = &timestamppb.Timestamp{}
	}
	l.RenewTime.Seconds, l.RenewTime.Nanos = now.Unix(), int32(now.Nanosecond())
	l.LeaseDurationSeconds = leaseSeconds
	return buf
}

// Renewed records that a renewal was sent, so the next may be empty.
func (s *Session) Renewed() { s.leased = true }

// RenewalRefused records that the collector refused a renewal (its ack
// carried an error other than a retry): the next renewal is a full
// LeaseRenewal dated by this machine's clock again. An empty one would
// repeat the last renewal the collector accepted, or be refused for want
// of one, so a node refused once (its clock too far from the collector's)
// would stay refused after its clock was fixed.
func (s *Session) RenewalRefused() { s.leased = false }

// Phased says whether renewals follow the collector's phase: it gave one,
// and no slow-down stretched the renew interval beyond it.
func (s *Session) Phased(interval time.Duration) bool {
	return s.hasPhase && s.minLease <= interval
}

// LeaseInterval is the renew interval, stretched by a slow-down.
func (s *Session) LeaseInterval(interval time.Duration) time.Duration {
	return max(interval, s.minLease)
}

// NextRenewal is the wait from now until the next lease renewal: one renew
// interval plus jitter, as the kubelet's lease loop waits, or, when the
// collector assigned a renewal phase, until the next instant of that phase
// (UntilPhase). A slow-down longer than the interval overrides the phase.
func (s *Session) NextRenewal(now time.Time, interval time.Duration) time.Duration {
	if !s.Phased(interval) {
		return Jitter(s.LeaseInterval(interval))
	}
	return UntilPhase(now, interval, s.phase)
}

// StatusInterval is the wait until the next status computation: the
// update frequency, stretched by a slow-down, plus jitter.
func (s *Session) StatusInterval(freq time.Duration) time.Duration {
	return Jitter(max(freq, s.minStatus))
}

// SlowDown applies the collector's SlowDown command: renewals and status
// computations no more often than it says, for the rest of the stream.
func (s *Session) SlowDown(sd *collectorv1.SlowDown) {
	s.minLease = sd.GetMinLeaseInterval().AsDuration()
	s.minStatus = sd.GetMinStatusInterval().AsDuration()
}

// SlowedDown returns the minimum intervals the collector asked for.
func (s *Session) SlowedDown() (lease, status time.Duration) { return s.minLease, s.minStatus }

// LeaseAtRisk says whether a slow-down spaces renewals more than 3 renew
// intervals apart: the lease may then lapse between renewals. The node
// complies anyway (the collector asked), but it is worth a warning.
func (s *Session) LeaseAtRisk(interval time.Duration) bool { return s.minLease > 3*interval }

// RetryAfter is when the collector wants a refused message again
// (Ack.retry_after), jittered like a refused registration so that a
// collector refusing many at once does not get them all back at once; ok
// is false when the ack asks for nothing.
func RetryAfter(ack *collectorv1.Ack) (d time.Duration, ok bool) {
	ra := ack.GetRetryAfter()
	if ra == nil {
		return 0, false
	}
	return RetryJitter(max(ra.AsDuration(), 0)), true
}

// CommandKind is what a collector's command asks for.
type CommandKind uint8

// Commands a node acts on.
const (
	CmdNone         CommandKind = iota // nothing (unknown, or register_queued after registration)
	CmdReportStatus                    // send the status now, changed or not
	CmdSlowDown                        // Session.SlowDown with Command.SlowDown
	CmdReconnect                       // end the stream after Command.After, open a new one at once
)

// Command is a collector command read by ReadCommand.
type Command struct {
	Kind   CommandKind
	Reason string
	// After: CmdReconnect's wait, uniform in [0, within), so the nodes of
	// a draining collector do not all come back in the same instant.
	After    time.Duration
	SlowDown *collectorv1.SlowDown
	// PreferredAddress: CmdReconnect's hint, the collector to open the
	// next stream on if the connection knows it (spec §20.3); "" for none.
	PreferredAddress string
}

// ReadCommand reads a command received after registration.
func ReadCommand(cmd *collectorv1.Command) Command {
	switch x := cmd.GetCommand().(type) {
	case *collectorv1.Command_ReportStatus:
		return Command{Kind: CmdReportStatus, Reason: x.ReportStatus.GetReason()}
	case *collectorv1.Command_SlowDown:
		return Command{Kind: CmdSlowDown, SlowDown: x.SlowDown}
	case *collectorv1.Command_Reconnect:
		c := Command{Kind: CmdReconnect, Reason: x.Reconnect.GetReason(), PreferredAddress: x.Reconnect.GetPreferredAddress()}
		if within := x.Reconnect.GetWithin().AsDuration(); within > 0 {
			c.After = rand.N(within)
		}
		return c
	}
	return Command{}
}

// ResumeReports is when the next unchanged status report is due after a
// (re)registration, and whether that may wait at all: a reconnect (the
// collector restarted, the connection broke) sends a status only if it
// changed or the report period is up, as it would have on the old stream;
// the renewal sent at once tells the new collector the node is alive.
// ownDue is the due time of this process's own last report (zero if it
// made none); else the stored status served at registration counts, when
// its heartbeat is younger than freq (StoredReport: the process
// restarted). The driver still compares its status with the stored one
// and sends at once if they differ, or when due is not after now.
// (Every reporter of a restarted collector sending its unchanged status at
// once cost that collector a seventh of its CPU while it re-registered the
// fleet. The stored heartbeat alone did not prevent it: collectors do not
// write unchanged reports, so it is the time of the last change, usually
// older than the report frequency.)
func ResumeReports(ownDue time.Time, stored *nodev1.NodeStatus, now time.Time, freq time.Duration) (due time.Time, ok bool) {
	if !ownDue.IsZero() {
		return ownDue, true
	}
	if at, ok := StoredReport(stored, now, freq); ok {
		return at.Add(freq), true
	}
	return time.Time{}, false
}

// StoredReport returns when the stored status st was reported (its Ready
// condition's heartbeat), and whether that is less than freq before now:
// then a reconnecting reporter counts it as its last report.
func StoredReport(st *nodev1.NodeStatus, now time.Time, freq time.Duration) (time.Time, bool) {
	hb := nodemodel.FindCondition(st.GetConditions(), nodemodel.Ready).GetLastHeartbeatTime()
	if hb == nil {
		return time.Time{}, false
	}
	at := hb.AsTime()
	age := now.Sub(at)
	return at, age >= 0 && age < freq
}

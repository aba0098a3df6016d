// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package validation

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
)

// FuzzReportRequest decodes arbitrary bytes as a ReportRequest, the way the
// collector receives them, and validates the message. Properties: nothing
// panics, and every refusal is an InvalidArgument status whose message
// starts with the path of a field. The seed corpus in
// testdata/fuzz/FuzzReportRequest holds valid and invalid messages of every
// kind. Run: go test -run '^$' -fuzz FuzzReportRequest -fuzztime 30s ./validation
func FuzzReportRequest(f *testing.F) {
	for _, m := range seedRequests() {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	lim := DefaultLimits()
	f.Fuzz(func(t *testing.T, data []byte) {
		var req collectorv1.ReportRequest
		if err := proto.Unmarshal(data, &req); err != nil {
			return
		}
		var l List
		switch m := req.GetMessage().(type) {
		case *collectorv1.ReportRequest_Register:
			l = Register(m.Register, now, lim)
		case *collectorv1.ReportRequest_Lease:
			l = LeaseRenewal(m.Lease, lim)
		case *collectorv1.ReportRequest_Status:
			l = StatusReport(m.Status, now, lim)
		case *collectorv1.ReportRequest_Leaving:
			l = Leaving(m.Leaving)
		case *collectorv1.ReportRequest_PodStatus:
			l = PodStatusUpdate(m.PodStatus, now, lim)
		case *collectorv1.ReportRequest_PodDelete:
			l = PodDelete(m.PodDelete, now, lim)
		case *collectorv1.ReportRequest_MirrorPod:
			l = MirrorPod(m.MirrorPod, now, lim)
		default:
			return
		}
		if len(l) == 0 {
			return
		}
		st, _ := status.FromError(Status(l))
		if st.Code() != codes.InvalidArgument {
			t.Fatalf("code %v, want InvalidArgument", st.Code())
		}
		if l[0].Field == "" || !strings.HasPrefix(st.Message(), l[0].Field+": ") {
			t.Fatalf("message %q does not start with field %q", st.Message(), l[0].Field)
		}
	})
}

func seedRequests() []*collectorv1.ReportRequest {
	valid := validStatus()
	bad := validStatus()
	bad.Capacity["cpu"] = "-1"
	bad.Addresses[0].Address = "not-an-ip"
	return []*collectorv1.ReportRequest{
		{Seq: 1, Message: &collectorv1.ReportRequest_Register{Register: &collectorv1.Register{NodeName: "node-1", Labels: map[string]string{"kubernetes.io/hostname": "node-1"}}}},
		{Seq: 1, Message: &collectorv1.ReportRequest_Register{Register: &collectorv1.Register{NodeName: ""}}},
		{Seq: 2, Message: &collectorv1.ReportRequest_Lease{Lease: &collectorv1.LeaseRenewal{RenewTime: ts(now), LeaseDurationSeconds: 40}}},
		{Seq: 3, Message: &collectorv1.ReportRequest_Lease{Lease: &collectorv1.LeaseRenewal{RenewTime: ts(now.Add(time.Hour)), LeaseDurationSeconds: 0}}},
		{Seq: 4, Message: &collectorv1.ReportRequest_Status{Status: &collectorv1.StatusReport{Status: valid}}},
		{Seq: 5, Message: &collectorv1.ReportRequest_Status{Status: &collectorv1.StatusReport{Status: bad}}},
		{Seq: 6, Message: &collectorv1.ReportRequest_Leaving{Leaving: &collectorv1.Leaving{Reason: "shutdown"}}},
		{Seq: 7, Message: &collectorv1.ReportRequest_PodStatus{PodStatus: &collectorv1.PodStatusUpdate{Namespace: "ns", Name: "p", Uid: "u",
			Status: &podv1.PodStatus{Phase: "Running", Conditions: []*podv1.PodCondition{{Type: "Ready", Status: "True"}}}}}},
		{Seq: 8, Message: &collectorv1.ReportRequest_PodDelete{PodDelete: &collectorv1.PodDelete{Namespace: "ns", Name: "p", Uid: "u", Status: &podv1.PodStatus{Phase: "Running"}}}},
		{Seq: 9, Message: &collectorv1.ReportRequest_MirrorPod{MirrorPod: &collectorv1.MirrorPod{Pod: &podv1.Pod{Metadata: &nodev1.ObjectMeta{Namespace: "ns", Name: "p-n1"}}}}},
	}
}

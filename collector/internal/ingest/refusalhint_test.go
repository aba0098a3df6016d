// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package ingest

import (
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	collectorv1 "github.com/nodepulse/nodepulse/gen/nodepulse/collector/v1"
)

// A refusal names the collector to try instead as a Reconnect detail,
// beside its RetryInfo, and names nobody when there is no hint.
func TestRefusalNamesACollector(t *testing.T) {
	details := func(err error) (retry time.Duration, to string) {
		for _, d := range status.Convert(err).Details() {
			switch d := d.(type) {
			case *errdetails.RetryInfo:
				retry = d.GetRetryDelay().AsDuration()
			case *collectorv1.Reconnect:
				to = d.GetPreferredAddress()
			}
		}
		return retry, to
	}
	err := withRetryAfter(status.New(codes.ResourceExhausted, "full"), 2*time.Second, "c2:9090")
	if retry, to := details(err); retry != 2*time.Second || to != "c2:9090" {
		t.Fatalf("refusal carries retry %s and hint %q, want 2s and c2:9090", retry, to)
	}
	if retry, to := details(withRetryAfter(status.New(codes.ResourceExhausted, "full"), 0, "")); retry != 0 || to != "" {
		t.Fatalf("refusal without retry or hint carries %s and %q", retry, to)
	}
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("code %s", status.Code(err))
	}
}

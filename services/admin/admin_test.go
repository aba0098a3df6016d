// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package admin

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestEndpoints(t *testing.T) {
	s, err := New(Config{ListenAddress: "127.0.0.1:0"}, zap.NewNop(), NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	base := "http://" + s.Addr().String()

	var notReady error = errors.New("etcd unreachable")
	s.AddReadyCheck("etcd", func() error { return notReady })
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "etcd: etcd unreachable") {
		t.Fatalf("readyz = %d %q", code, body)
	}
	notReady = nil
	if code, _ := get(t, base+"/readyz"); code != 200 {
		t.Fatalf("readyz = %d after recovery", code)
	}
	if code, _ := get(t, base+"/healthz"); code != 200 {
		t.Fatalf("healthz = %d", code)
	}
	if code, body := get(t, base+"/metrics"); code != 200 || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("metrics = %d", code)
	}
	if code, _ := get(t, base+"/debug/pprof/"); code != 200 {
		t.Fatalf("pprof = %d", code)
	}
}

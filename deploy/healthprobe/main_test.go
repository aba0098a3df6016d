// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestProbe(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
	defer ok.Close()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "etcd: unreachable", http.StatusServiceUnavailable)
	}))
	defer bad.Close()
	redirect := httptest.NewServer(http.RedirectHandler(ok.URL, http.StatusFound))
	defer redirect.Close()

	cases := []struct {
		name string
		args []string
		want int
		out  string
	}{
		{"healthy", []string{ok.URL}, 0, "ok "},
		{"unhealthy", []string{bad.URL}, 1, "HTTP 503: etcd: unreachable"},
		{"one of two fails", []string{ok.URL, bad.URL}, 1, "FAIL"},
		{"redirect is not followed", []string{redirect.URL}, 1, "HTTP 302"},
		{"nothing listens", []string{"http://127.0.0.1:1/readyz"}, 1, "FAIL"},
		{"no url", nil, 2, ""},
		{"bad flag", []string{"--nope", ok.URL}, 2, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if got := run(c.args, &out, &errOut); got != c.want {
				t.Fatalf("exit %d, want %d; out=%q err=%q", got, c.want, out.String(), errOut.String())
			}
			if !strings.Contains(out.String(), c.out) {
				t.Fatalf("output %q does not contain %q", out.String(), c.out)
			}
		})
	}
}

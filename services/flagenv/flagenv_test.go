// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package flagenv

import (
	"bytes"
	"flag"
	"strings"
	"testing"
	"time"
)

func TestPrecedenceFlagOverEnvOverDefault(t *testing.T) {
	env := map[string]string{"NP_ETCD_ENDPOINTS": "a:1,b:2", "NP_GRACE_PERIOD": "7s", "NP_LOG_LEVEL": "debug"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var eps StringList
	fs.Var(&eps, "etcd.endpoints", "endpoints")
	grace := fs.Duration("grace-period", time.Second, "grace")
	level := fs.String("log.level", "info", "level")
	if err := Parse(fs, "NP", "x", []string{"--log.level=warn"}, lookup); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(eps, "|"); got != "a:1|b:2" {
		t.Errorf("endpoints = %q", got)
	}
	if *grace != 7*time.Second {
		t.Errorf("grace = %v", *grace)
	}
	if *level != "warn" {
		t.Errorf("level = %q, flag must beat env", *level)
	}
}

func TestBadEnvNamesVariable(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.Duration("grace-period", time.Second, "grace")
	err := Parse(fs, "NP", "x", nil, func(k string) (string, bool) { return "soon", k == "NP_GRACE_PERIOD" })
	if err == nil || !strings.Contains(err.Error(), "NP_GRACE_PERIOD") {
		t.Fatalf("err = %v, want it to name NP_GRACE_PERIOD", err)
	}
}

func TestUsageListsEnv(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.String("etcd.endpoints", "127.0.0.1:2379", "etcd client URLs")
	var buf bytes.Buffer
	PrintUsage(&buf, fs, "NP", "x does things")
	for _, want := range []string{"x does things", "--etcd.endpoints", "$NP_ETCD_ENDPOINTS", "default 127.0.0.1:2379", "[etcd]"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("usage lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestStringMap(t *testing.T) {
	var m StringMap
	if err := m.Set("a=1, b=2"); err != nil || m["a"] != "1" || m["b"] != "2" {
		t.Fatalf("Set: %v %v", m, err)
	}
	if err := m.Set("novalue"); err == nil {
		t.Fatal("want error for missing =")
	}
}

// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package watch

import (
	"net/http/httptest"
	"strings"
	"testing"
)

func TestFilterTransitions(t *testing.T) {
	f := NewFilter()
	steps := []struct {
		typ   string
		match bool
		want  string
	}{
		{Added, false, ""},
		{Modified, true, Added},
		{Modified, true, Modified},
		{Modified, false, Deleted},
		{Modified, false, ""},
		{Modified, true, Added},
		{Deleted, false, Deleted},
		{Deleted, false, ""},
	}
	for i, s := range steps {
		if got := f.Next("k", s.typ, s.match); got != s.want {
			t.Fatalf("step %d: %s/%v gave %q, want %q", i, s.typ, s.match, got, s.want)
		}
	}
}

func TestFraming(t *testing.T) {
	rec := httptest.NewRecorder()
	w := Start(rec)
	if err := w.Send(Added, map[string]string{"kind": "Node"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Send(Bookmark, map[string]any{"metadata": map[string]string{"resourceVersion": "7"}}); err != nil {
		t.Fatal(err)
	}
	want := `{"type":"ADDED","object":{"kind":"Node"}}` + "\n" + `{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"7"}}}` + "\n"
	if got := rec.Body.String(); got != want {
		t.Fatalf("stream\n%s\nwant\n%s", got, want)
	}
	if !rec.Flushed || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		t.Fatal("not flushed or wrong content type")
	}
}

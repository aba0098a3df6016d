// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package watch writes a Kubernetes watch response: a chunked stream of
// JSON-encoded metav1.WatchEvent objects, one per line, flushed after each
// so a client sees every event when it happens.
package watch

import (
	"encoding/json"
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Event types.
const (
	Added    = "ADDED"
	Modified = "MODIFIED"
	Deleted  = "DELETED"
	Bookmark = "BOOKMARK"
	Error    = "ERROR"
)

// Writer streams events to one client.
type Writer struct {
	w   http.ResponseWriter
	f   http.Flusher
	enc *json.Encoder
}

// Start answers 200 with the watch content type and returns the writer.
func Start(w http.ResponseWriter) *Writer {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	out := &Writer{w: w, f: f, enc: json.NewEncoder(w)}
	out.flush()
	return out
}

func (w *Writer) flush() {
	if w.f != nil {
		w.f.Flush()
	}
}

// Send writes one event carrying obj (any JSON-serialisable object).
func (w *Writer) Send(typ string, obj any) error {
	raw, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("encode %s event: %w", typ, err)
	}
	if err := w.enc.Encode(metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: raw}}); err != nil {
		return fmt.Errorf("write %s event: %w", typ, err)
	}
	w.flush()
	return nil
}

// Filter turns a stream of changes through a selector into the events a
// selecting client sees: an object that starts matching is ADDED, one that
// stops matching DELETED, as kube-apiserver's filtered watches do.
type Filter struct{ seen map[string]bool }

// NewFilter returns an empty filter.
func NewFilter() *Filter { return &Filter{seen: map[string]bool{}} }

// Next maps a change of type typ of the object with key, matching or not,
// to the event to send ("" for none).
func (f *Filter) Next(key, typ string, match bool) string {
	had := f.seen[key]
	switch {
	case typ == Deleted:
		delete(f.seen, key)
		if had {
			return Deleted
		}
		return ""
	case match && had:
		return Modified
	case match:
		f.seen[key] = true
		return Added
	case had:
		delete(f.seen, key)
		return Deleted
	}
	return ""
}

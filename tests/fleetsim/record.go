// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package fleetsim

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
)

// Recorder appends what a robustness checker needs to know about the
// simulator's side of the protocol to a JSONL file: every status sent
// (before it is sent, with its bytes) and every durable ack received.
// Each line is written with one unbuffered write on an O_APPEND file, so a
// simulator killed with SIGKILL loses at most a line it was writing, and
// a restarted simulator appends after the killed one: for one node the
// file's order is the order the node sent its statuses in.
type Recorder struct {
	mu  sync.Mutex
	f   *os.File
	inc int64 // this process's incarnation: its start time, unix ns
}

// RecordLine is one line of a record file.
type RecordLine struct {
	// Kind: "status" (a status is about to be sent) or "ack" (a durable ack
	// arrived).
	Kind string `json:"k"`
	// Node name, incarnation of the simulator process, the stream's
	// generation within it and the message's sequence number: together
	// they name one message.
	Node string `json:"n"`
	Inc  int64  `json:"i"`
	Gen  uint32 `json:"g"`
	Seq  uint64 `json:"q"`
	// Status: the status sent, protobuf, base64 (status lines only).
	Status string `json:"s,omitempty"`
	// Time of the line, unix ms, on the machine's clock (not the
	// simulator's stepped clock).
	Time int64 `json:"t"`
}

// OpenRecorder opens (appending) the record file at path; "" records
// nothing.
func OpenRecorder(path string, incarnation int64) (*Recorder, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("record file: %w", err)
	}
	return &Recorder{f: f, inc: incarnation}, nil
}

func (r *Recorder) write(l RecordLine) {
	l.Inc, l.Time = r.inc, time.Now().UnixMilli()
	b, err := json.Marshal(l)
	if err != nil {
		return
	}
	b = append(b, '\n')
	r.mu.Lock()
	_, _ = r.f.Write(b)
	r.mu.Unlock()
}

// Status records that node is sending st as message seq of stream gen.
func (r *Recorder) Status(node string, gen uint32, seq uint64, st *nodev1.NodeStatus) {
	if r == nil {
		return
	}
	b, err := proto.Marshal(st)
	if err != nil {
		return
	}
	r.write(RecordLine{Kind: "status", Node: node, Gen: gen, Seq: seq, Status: base64.StdEncoding.EncodeToString(b)})
}

// Ack records a durable ack of message seq on stream gen of node.
func (r *Recorder) Ack(node string, gen uint32, seq uint64) {
	if r == nil {
		return
	}
	r.write(RecordLine{Kind: "ack", Node: node, Gen: gen, Seq: seq})
}

// Close closes the file.
func (r *Recorder) Close() error {
	if r == nil {
		return nil
	}
	return r.f.Close()
}

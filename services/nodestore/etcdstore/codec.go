// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package etcdstore

import (
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"io"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/nodepulse/nodepulse/services/nodestore"
)

// Stored values are the protobuf encoding of the object, either as it is
// ("plain") or compressed:
//
//	0x00 <dictionary version> <raw DEFLATE (RFC 1951) of the protobuf bytes>
//
// A protobuf message never starts with 0x00 (it would be field number 0,
// which is invalid, and an empty message is stored as zero bytes), so the
// first byte tells the two apart and values written before compression
// existed stay readable. The version byte names a set of preset
// dictionaries, one per kind (dictionaries.go); a kind without a dictionary
// in that set is DEFLATEd without one. Every released version stays
// decodable for ever; a new dictionary is a new version.
const compressedMarker = 0x00

// minCompressLen: values shorter than this are stored plain. Every encode
// costs ~10-20 µs however small the value (mostly compress/flate clearing
// its hash tables on Reset), and below this the two header bytes and
// DEFLATE's block framing eat most of what a dictionary match saves: a
// plain health object (38 B) would become 36 B.
const minCompressLen = 64

// maxDecodedLen bounds what one value may inflate to: a corrupted value
// must fail, not allocate gigabytes. etcd's own request limit is 1.5 MiB.
const maxDecodedLen = 16 << 20

// compressLevel: on the simulator's objects levels 6 to 9 give the same
// sizes within 1 %; BestSpeed (1) ignores the preset dictionary altogether
// (its encoder does not look back into it) and would gain almost nothing.
const compressLevel = flate.DefaultCompression

// codec encodes values of every kind with the dictionaries of one version
// and decodes every known version.
type codec struct {
	// write: compress what is written. Reading understands both always.
	write   bool
	version byte
	writers map[nodestore.Kind]*sync.Pool // of *encoder
	readers sync.Pool                     // of *decoder
}

type encoder struct {
	w   *flate.Writer
	buf bytes.Buffer
}

type decoder struct {
	r   io.ReadCloser // flate.Resetter
	src bytes.Reader
	out bytes.Buffer
}

func newCodec(write bool) *codec {
	c := &codec{write: write, version: currentDictionaries, writers: map[nodestore.Kind]*sync.Pool{}}
	for _, k := range nodestore.Kinds {
		dict := []byte(dictionaryOf(currentDictionaries, k))
		c.writers[k] = &sync.Pool{New: func() any {
			e := &encoder{}
			// Only fails for an invalid level.
			e.w, _ = flate.NewWriterDict(&e.buf, compressLevel, dict)
			return e
		}}
	}
	c.readers.New = func() any {
		d := &decoder{}
		d.r = flate.NewReader(&d.src)
		return d
	}
	return c
}

// defaultCodec compresses; it serves the package-level helpers.
var defaultCodec = newCodec(true)

// encode returns the stored form of m, as a string because that is what
// clientv3.OpPut takes (one copy, not two).
func (c *codec) encode(k nodestore.Kind, m proto.Message) (string, error) {
	b, err := proto.Marshal(m)
	if err != nil {
		return "", err
	}
	if !c.write || len(b) < minCompressLen {
		return string(b), nil
	}
	pool := c.writers[k]
	if pool == nil {
		return string(b), nil
	}
	e := pool.Get().(*encoder)
	defer pool.Put(e)
	e.buf.Reset()
	e.buf.WriteByte(compressedMarker)
	e.buf.WriteByte(c.version)
	e.w.Reset(&e.buf) // keeps the dictionary
	if _, err := e.w.Write(b); err != nil {
		return "", err
	}
	if err := e.w.Close(); err != nil {
		return "", err
	}
	if e.buf.Len() >= len(b) {
		return string(b), nil // does not pay
	}
	s := e.buf.String()
	if e.buf.Cap() > 64<<10 {
		e.buf = bytes.Buffer{} // do not pool a rare large buffer
	}
	return s, nil
}

// errUnknownVersion: a compressed value names a dictionary version this
// build does not have (written by a newer nodepulse).
var errUnknownVersion = errors.New("unknown dictionary version")

// decode unmarshals a stored value of kind k into m.
func (c *codec) decode(k nodestore.Kind, value []byte, m proto.Message) error {
	if len(value) == 0 || value[0] != compressedMarker {
		return proto.Unmarshal(value, m)
	}
	if len(value) < 2 {
		return errors.New("compressed value without a dictionary version")
	}
	dict, ok := dictionary(value[1], k)
	if !ok {
		return fmt.Errorf("%w %d (written by a newer nodepulse?)", errUnknownVersion, value[1])
	}
	d := c.readers.Get().(*decoder)
	defer c.readers.Put(d)
	d.src.Reset(value[2:])
	d.out.Reset()
	if err := d.r.(flate.Resetter).Reset(&d.src, dict); err != nil {
		return fmt.Errorf("inflate (dictionary version %d): %w", value[1], err)
	}
	n, err := d.out.ReadFrom(io.LimitReader(d.r, maxDecodedLen+1))
	if err != nil {
		return fmt.Errorf("inflate (dictionary version %d): %w", value[1], err)
	}
	if n > maxDecodedLen {
		return fmt.Errorf("inflate: more than %d bytes", maxDecodedLen)
	}
	// proto.Unmarshal copies what it keeps, so the buffer can be reused.
	err = proto.Unmarshal(d.out.Bytes(), m)
	if d.out.Cap() > 64<<10 {
		d.out = bytes.Buffer{}
	}
	return err
}

// EncodeValue returns the bytes this build stores for m as an object of kind
// k (compressed when that pays). Tools and tests use it; the store itself
// compresses unless Config.PlainValues is set.
func EncodeValue(k nodestore.Kind, m proto.Message) ([]byte, error) {
	s, err := defaultCodec.encode(k, m)
	return []byte(s), err
}

// DecodeValue decodes a stored value of kind k, plain or compressed with
// any dictionary version this build knows, for tools that read etcd
// directly (tests/cmd/etcdsize).
func DecodeValue(k nodestore.Kind, value []byte) (proto.Message, error) {
	m := k.New()
	if m == nil {
		return nil, fmt.Errorf("unknown kind %q", k)
	}
	if err := defaultCodec.decode(k, value, m); err != nil {
		return nil, err
	}
	return m, nil
}

// IsCompressed reports whether a stored value is in the compressed form.
func IsCompressed(value []byte) bool { return len(value) > 0 && value[0] == compressedMarker }

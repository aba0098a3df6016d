// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package etcdstore

import "github.com/nodepulse/nodepulse/services/nodestore"

// Preset DEFLATE dictionaries of the compressed value format (codec.go).
//
// A dictionary is part of the storage format for ever once a release has
// written with it: a value compressed with it cannot be read without the
// exact same bytes. So:
//   - never edit dictionariesV1 (or any released set); TestDictionariesPinned
//     fails on any change;
//   - a better dictionary is a new version: generate dictionaries_v<N>.go
//     (go test -run TestGenerateDictionaries -gen-dictionaries=<N>), add it
//     to dictionarySets, and only then point currentDictionaries at it, in a
//     release after the one that can read it (readers first, then writers).
//
// A kind missing from a set is DEFLATEd without a dictionary.
var dictionarySets = map[byte]map[nodestore.Kind]string{
	1: dictionariesV1,
}

// currentDictionaries is the version this build writes.
const currentDictionaries byte = 1

// dictionaryBytes holds each set as []byte, converted once.
var dictionaryBytes = func() map[byte]map[nodestore.Kind][]byte {
	out := map[byte]map[nodestore.Kind][]byte{}
	for v, set := range dictionarySets {
		out[v] = map[nodestore.Kind][]byte{}
		for k, d := range set {
			out[v][k] = []byte(d)
		}
	}
	return out
}()

// dictionary returns the dictionary of kind k in version v (nil for a kind
// the set has none for), and false for an unknown version.
func dictionary(v byte, k nodestore.Kind) ([]byte, bool) {
	set, ok := dictionaryBytes[v]
	if !ok {
		return nil, false
	}
	return set[dictionaryKind(k)], true
}

func dictionaryOf(v byte, k nodestore.Kind) string { return dictionarySets[v][dictionaryKind(k)] }

// dictionaryKind is the kind whose dictionary k uses: a batch of events is
// events, so it shares their dictionary in every version (a batch added no
// set of its own, and every set that has events serves batches too).
func dictionaryKind(k nodestore.Kind) nodestore.Kind {
	if k == nodestore.EventBatches {
		return nodestore.Events
	}
	return k
}

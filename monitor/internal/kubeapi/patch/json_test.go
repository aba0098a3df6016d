// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package patch

import (
	"encoding/json"
	"reflect"
	"testing"
)

func jsonEqual(t *testing.T, a []byte, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package patch applies the PATCH bodies kubectl sends (strategic merge,
// JSON merge, JSON patch) to an object's JSON with the libraries
// kube-apiserver uses, so list semantics (taints replaced whole,
// conditions merged by type) are Kubernetes'.
package patch

import (
	"errors"
	"fmt"
	"mime"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// Media types of the patch kinds.
const (
	Strategic       = "application/strategic-merge-patch+json"
	Merge           = "application/merge-patch+json"
	JSON            = "application/json-patch+json"
	ServerSideApply = "application/apply-patch+yaml"
)

// ErrUnsupported is a patch media type this server does not apply.
var ErrUnsupported = errors.New("unsupported patch type")

// Apply returns original (JSON) with the patch of contentType applied;
// dataStruct is a value of the object's Go type (strategic merge reads its
// struct tags).
func Apply(contentType string, original, body []byte, dataStruct any) ([]byte, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, fmt.Errorf("%w: %q", ErrUnsupported, contentType)
	}
	switch mt {
	case Strategic:
		return strategicpatch.StrategicMergePatch(original, body, dataStruct)
	case Merge:
		return jsonpatch.MergePatch(original, body)
	case JSON:
		p, err := jsonpatch.DecodePatch(body)
		if err != nil {
			return nil, err
		}
		return p.Apply(original)
	}
	return nil, fmt.Errorf("%w: %q (server-side apply is not served)", ErrUnsupported, mt)
}

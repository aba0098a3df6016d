// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package manifests

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// metaOf returns the ObjectMeta of any decoded object.
func metaOf(o object) *metav1.ObjectMeta {
	if m, ok := o.obj.(metav1.ObjectMetaAccessor); ok {
		return m.GetObjectMeta().(*metav1.ObjectMeta)
	}
	return nil
}

// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package manifests checks the Kubernetes manifests in deploy/kubernetes:
// they are rendered with kustomize's Go library (what `kubectl apply -k`
// runs), decoded strictly into the k8s.io/api types, and held to the
// deployment rules in check_test.go. A deliberately broken fixture proves the
// same checks reject what they should.
package manifests

// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package openapi holds the generated OpenAPI definitions of the k8s.io/api
// types (and the k8s.io/apimachinery types they use) that the monitor's
// Kubernetes API serves: GetOpenAPIDefinitions, in zz_generated.openapi.go,
// written by kube-openapi's openapi-gen, pinned by the tool line in gen/go.mod.
//
// Do not edit zz_generated.openapi.go; regenerate it with `make gen`
// (`make check-gen` fails when it is stale).
package openapi

// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package manifests

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The custom resources the manifests may contain (Prometheus Operator,
// cert-manager). Their Go types live in large modules of their own, so the
// checks decode into these copies of the part of each CRD's schema the
// manifests use, with the CRDs' JSON field names: decoding is strict, so a
// misspelled or misplaced field fails as it would against the CRD's schema.

// relabeling is monitoring.coreos.com/v1 RelabelConfig.
type relabeling struct {
	SourceLabels []string `json:"sourceLabels,omitempty"`
	Separator    *string  `json:"separator,omitempty"`
	TargetLabel  string   `json:"targetLabel,omitempty"`
	Regex        string   `json:"regex,omitempty"`
	Replacement  *string  `json:"replacement,omitempty"`
	Action       string   `json:"action,omitempty"`
}

// scrapeEndpoint is the shared part of ServiceMonitor's Endpoint and
// PodMonitor's PodMetricsEndpoint.
type scrapeEndpoint struct {
	Port          string       `json:"port,omitempty"`
	Path          string       `json:"path,omitempty"`
	Scheme        string       `json:"scheme,omitempty"`
	Interval      string       `json:"interval,omitempty"`
	ScrapeTimeout string       `json:"scrapeTimeout,omitempty"`
	HonorLabels   bool         `json:"honorLabels,omitempty"`
	Relabelings   []relabeling `json:"relabelings,omitempty"`
}

type namespaceSelector struct {
	Any        bool     `json:"any,omitempty"`
	MatchNames []string `json:"matchNames,omitempty"`
}

type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		JobLabel          string               `json:"jobLabel,omitempty"`
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector *namespaceSelector   `json:"namespaceSelector,omitempty"`
		Endpoints         []scrapeEndpoint     `json:"endpoints"`
	} `json:"spec"`
}

type podMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		JobLabel            string               `json:"jobLabel,omitempty"`
		Selector            metav1.LabelSelector `json:"selector"`
		NamespaceSelector   *namespaceSelector   `json:"namespaceSelector,omitempty"`
		PodMetricsEndpoints []scrapeEndpoint     `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

type ruleGroup struct {
	Name     string `json:"name"`
	Interval string `json:"interval,omitempty"`
	Rules    []struct {
		Alert         string            `json:"alert,omitempty"`
		Record        string            `json:"record,omitempty"`
		Expr          string            `json:"expr"`
		For           string            `json:"for,omitempty"`
		KeepFiringFor string            `json:"keep_firing_for,omitempty"`
		Labels        map[string]string `json:"labels,omitempty"`
		Annotations   map[string]string `json:"annotations,omitempty"`
	} `json:"rules"`
}

type prometheusRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Groups []ruleGroup `json:"groups"`
	} `json:"spec"`
}

// issuerRef is cert-manager's ObjectReference.
type issuerRef struct {
	Name  string `json:"name"`
	Kind  string `json:"kind,omitempty"`
	Group string `json:"group,omitempty"`
}

type issuer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		SelfSigned *struct {
			CRLDistributionPoints []string `json:"crlDistributionPoints,omitempty"`
		} `json:"selfSigned,omitempty"`
		CA *struct {
			SecretName string `json:"secretName"`
		} `json:"ca,omitempty"`
	} `json:"spec"`
}

type certificate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		SecretName  string `json:"secretName"`
		CommonName  string `json:"commonName,omitempty"`
		IsCA        bool   `json:"isCA,omitempty"`
		Duration    string `json:"duration,omitempty"`
		RenewBefore string `json:"renewBefore,omitempty"`
		Subject     *struct {
			Organizations       []string `json:"organizations,omitempty"`
			OrganizationalUnits []string `json:"organizationalUnits,omitempty"`
		} `json:"subject,omitempty"`
		DNSNames    []string `json:"dnsNames,omitempty"`
		IPAddresses []string `json:"ipAddresses,omitempty"`
		Usages      []string `json:"usages,omitempty"`
		PrivateKey  *struct {
			Algorithm      string `json:"algorithm,omitempty"`
			Size           int    `json:"size,omitempty"`
			Encoding       string `json:"encoding,omitempty"`
			RotationPolicy string `json:"rotationPolicy,omitempty"`
		} `json:"privateKey,omitempty"`
		IssuerRef issuerRef `json:"issuerRef"`
	} `json:"spec"`
}

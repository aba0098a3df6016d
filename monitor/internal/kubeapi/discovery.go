// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package kubeapi

import (
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
)

var (
	readVerbs  = metav1.Verbs{"get", "list", "watch"}
	groupOrder = []string{"apps/v1", "coordination.k8s.io/v1", "policy/v1"}
)

// apiResources is the discovery document of each group version: what is
// served, with kube-apiserver's names, short names and verbs.
var apiResources = map[string][]metav1.APIResource{
	"v1": {
		{Name: "nodes", SingularName: "node", Kind: "Node", Verbs: metav1.Verbs{"get", "list", "watch", "patch"}, ShortNames: []string{"no"}},
		{Name: "nodes/status", Kind: "Node", Verbs: metav1.Verbs{"get", "patch"}},
		{Name: "pods", SingularName: "pod", Namespaced: true, Kind: "Pod", Verbs: metav1.Verbs{"delete", "get", "list", "watch"}, ShortNames: []string{"po"}, Categories: []string{"all"}},
		{Name: "pods/status", Namespaced: true, Kind: "Pod", Verbs: metav1.Verbs{"get"}},
		{Name: "pods/eviction", Namespaced: true, Group: "policy", Version: "v1", Kind: "Eviction", Verbs: metav1.Verbs{"create"}},
		{Name: "events", SingularName: "event", Namespaced: true, Kind: "Event", Verbs: metav1.Verbs{"get", "list"}, ShortNames: []string{"ev"}},
		{Name: "namespaces", SingularName: "namespace", Kind: "Namespace", Verbs: metav1.Verbs{"get", "list"}, ShortNames: []string{"ns"}},
	},
	"coordination.k8s.io/v1": {
		{Name: "leases", SingularName: "lease", Namespaced: true, Kind: "Lease", Verbs: metav1.Verbs{"get", "list"}},
	},
	"apps/v1": {
		{Name: "daemonsets", SingularName: "daemonset", Namespaced: true, Kind: "DaemonSet", Verbs: readVerbs[:2], ShortNames: []string{"ds"}, Categories: []string{"all"}},
		{Name: "replicasets", SingularName: "replicaset", Namespaced: true, Kind: "ReplicaSet", Verbs: readVerbs[:2], ShortNames: []string{"rs"}, Categories: []string{"all"}},
		{Name: "statefulsets", SingularName: "statefulset", Namespaced: true, Kind: "StatefulSet", Verbs: readVerbs[:2], ShortNames: []string{"sts"}, Categories: []string{"all"}},
	},
	"policy/v1": {
		{Name: "poddisruptionbudgets", SingularName: "poddisruptionbudget", Namespaced: true, Kind: "PodDisruptionBudget", Verbs: readVerbs[:2], ShortNames: []string{"pdb"}},
	},
}

// discovery answers /api, /apis, /api/v1 and /apis/<group>/<version> with
// the legacy (unaggregated) documents: kubectl decides by the response's
// content type and then fetches each group version.
func (s *Server) discovery(w http.ResponseWriter, path string) bool {
	switch path {
	case "/api":
		writeJSON(w, 200, metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: s.addr}}})
	case "/apis":
		l := metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
		for _, gv := range groupOrder {
			g, v := splitGV(gv)
			d := metav1.GroupVersionForDiscovery{GroupVersion: gv, Version: v}
			l.Groups = append(l.Groups, metav1.APIGroup{Name: g, Versions: []metav1.GroupVersionForDiscovery{d}, PreferredVersion: d})
		}
		writeJSON(w, 200, l)
	case "/version":
		writeJSON(w, 200, version.Info{Major: "1", Minor: "37", GitVersion: "v1.37.2-nodepulse", Platform: "linux/amd64"})
	default:
		gv := ""
		if path == "/api/v1" {
			gv = "v1"
		} else if rest, ok := cutPrefix(path, "/apis/"); ok {
			gv = rest
		}
		rs, ok := apiResources[gv]
		if !ok {
			if g, _, _ := cut(gv, "/"); gv != "" && !contains(gv, "/") {
				for _, x := range groupOrder {
					if gg, v := splitGV(x); gg == g {
						d := metav1.GroupVersionForDiscovery{GroupVersion: x, Version: v}
						writeJSON(w, 200, metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: g, Versions: []metav1.GroupVersionForDiscovery{d}, PreferredVersion: d})
						return true
					}
				}
			}
			return false
		}
		writeJSON(w, 200, metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv, APIResources: rs})
	}
	return true
}

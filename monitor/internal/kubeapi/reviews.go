// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package kubeapi

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/nodepulse/nodepulse/monitor/internal/authz"
)

// The self reviews answer from the same Policy that guards both doors:
// `kubectl auth can-i` (SelfSubjectAccessReview), `kubectl auth can-i
// --list` (SelfSubjectRulesReview) and `kubectl auth whoami`
// (SelfSubjectReview), as kube-apiserver's registries of the same names.

type review struct {
	newObj func() runtime.Object
	kind   string
}

func (r *review) New() runtime.Object     { return r.newObj() }
func (r *review) Destroy()                {}
func (r *review) NamespaceScoped() bool   { return false }
func (r *review) GetSingularName() string { return kindLower(r.kind) }
func (r *review) Kind() string            { return r.kind }
func (r *review) requester(ctx context.Context) (user.Info, error) {
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok || u == nil {
		return nil, apierrors.NewBadRequest("no user present on request")
	}
	return u, nil
}

type accessReview struct {
	review
	policy authz.Policy
}

var _ rest.Creater = (*accessReview)(nil)

func (r *accessReview) Create(ctx context.Context, obj runtime.Object, _ rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	in, ok := obj.(*authorizationv1.SelfSubjectAccessReview)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a SelfSubjectAccessReview: %T", obj))
	}
	u, err := r.requester(ctx)
	if err != nil {
		return nil, err
	}
	a := authorizer.AttributesRecord{User: u}
	switch ra, na := in.Spec.ResourceAttributes, in.Spec.NonResourceAttributes; {
	case ra != nil:
		a.ResourceRequest = true
		a.Verb, a.APIGroup, a.APIVersion, a.Resource, a.Subresource, a.Namespace, a.Name = ra.Verb, ra.Group, ra.Version, ra.Resource, ra.Subresource, ra.Namespace, ra.Name
	case na != nil:
		a.Verb, a.Path = na.Verb, na.Path
	default:
		return nil, apierrors.NewInvalid(authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectAccessReview").GroupKind(), "", nil)
	}
	dec, why, _ := r.policy.Authorize(ctx, a)
	out := in.DeepCopy()
	out.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: dec == authorizer.DecisionAllow, Denied: dec == authorizer.DecisionDeny, Reason: why}
	return out, nil
}

type rulesReview struct {
	review
	policy authz.Policy
}

var _ rest.Creater = (*rulesReview)(nil)

func (r *rulesReview) Create(ctx context.Context, obj runtime.Object, _ rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	in, ok := obj.(*authorizationv1.SelfSubjectRulesReview)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a SelfSubjectRulesReview: %T", obj))
	}
	u, err := r.requester(ctx)
	if err != nil {
		return nil, err
	}
	res, nonRes, incomplete, err := r.policy.RulesFor(ctx, u, in.Spec.Namespace)
	out := in.DeepCopy()
	out.Status.Incomplete = incomplete
	if err != nil {
		out.Status.EvaluationError = err.Error()
	}
	for _, rr := range res {
		out.Status.ResourceRules = append(out.Status.ResourceRules, authorizationv1.ResourceRule{Verbs: rr.GetVerbs(), APIGroups: rr.GetAPIGroups(), Resources: rr.GetResources(), ResourceNames: rr.GetResourceNames()})
	}
	for _, nr := range nonRes {
		out.Status.NonResourceRules = append(out.Status.NonResourceRules, authorizationv1.NonResourceRule{Verbs: nr.GetVerbs(), NonResourceURLs: nr.GetNonResourceURLs()})
	}
	return out, nil
}

type selfReview struct{ review }

var _ rest.Creater = (*selfReview)(nil)

func (r *selfReview) Create(ctx context.Context, obj runtime.Object, _ rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	in, ok := obj.(*authenticationv1.SelfSubjectReview)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a SelfSubjectReview: %T", obj))
	}
	u, err := r.requester(ctx)
	if err != nil {
		return nil, err
	}
	out := in.DeepCopy()
	out.Status.UserInfo = authenticationv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
	if ex := u.GetExtra(); len(ex) > 0 {
		out.Status.UserInfo.Extra = map[string]authenticationv1.ExtraValue{}
		for k, v := range ex {
			out.Status.UserInfo.Extra[k] = v
		}
	}
	return out, nil
}

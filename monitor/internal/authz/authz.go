// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package authz decides who may do what, once, in Kubernetes terms: a
// user with groups asks to do a verb on a resource (and subresource) in a
// namespace, by name. Both front doors ask it: the Kubernetes API through
// k8s.io/apiserver's authorization filter (Policy is an
// authorizer.Authorizer and a RuleResolver, so `kubectl auth can-i` and
// `--list` answer from the same rules), and the gRPC API through the
// interceptors of grpc.go, which name each gRPC method's verb and resource.
package authz

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/nodepulse/nodepulse/services/identity"
)

// Groups of the identities nodepulse's CA issues, as Kubernetes names them.
const (
	// OperatorsGroup may change anything (certificate organization
	// nodepulse:operators, or the operator bearer token on a plaintext
	// server).
	OperatorsGroup = identity.OperatorOrganization
	// NodesGroup holds the node identities system:node:<name>.
	NodesGroup = user.NodesGroup
	// TokenOperator is the user name of a caller holding the operator token.
	TokenOperator = "nodepulse:operator-token"
)

// readVerbs change nothing.
var readVerbs = []string{"get", "list", "watch"}

// selfReviews are what any caller may create: questions about itself.
var selfReviews = []string{"selfsubjectaccessreviews", "selfsubjectrulesreviews", "selfsubjectreviews"}

// Policy is nodepulse's authorization:
//
//   - reads: any authenticated caller; on a plaintext server (no caller
//     has an identity) anyone;
//   - changes: the operators group; on a plaintext server a caller with
//     the operator token when one is set, else anyone (development mode);
//   - node identities read, and change only the status of pods (update and
//     patch of pods/status), and of those only the pods bound to them: the
//     pod service checks the binding (NodeName), as kube-apiserver's
//     NodeRestriction admission does after the Node authorizer let the
//     request in. A node writes its own status and lease over the
//     collector's Report stream, which checks the certificate's node name;
//   - every caller may ask about itself (SelfSubjectAccessReview,
//     SelfSubjectRulesReview, SelfSubjectReview).
type Policy struct {
	// Plaintext: the door has no TLS, so anonymous callers are let in.
	Plaintext bool
	// OperatorToken, when set, makes plaintext changes need it.
	OperatorToken string
}

// Authorize implements authorizer.Authorizer.
func (p Policy) Authorize(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
	ok, why := p.decide(a)
	if ok {
		return authorizer.DecisionAllow, "", nil
	}
	return authorizer.DecisionDeny, why, nil
}

func (p Policy) decide(a authorizer.Attributes) (bool, string) {
	u := a.GetUser()
	if u == nil {
		return false, "no user"
	}
	verb := a.GetVerb()
	read := slices.Contains(readVerbs, verb) || (!a.IsResourceRequest() && (verb == "get" || verb == "head"))
	switch {
	case a.IsResourceRequest() && verb == "create" && slices.Contains(selfReviews, a.GetResource()):
		return true, ""
	case read:
		return true, ""
	case slices.Contains(u.GetGroups(), NodesGroup) && nodePodStatus(a):
		return true, ""
	case slices.Contains(u.GetGroups(), NodesGroup):
		return false, fmt.Sprintf("nodes change only the status of their pods through this API: node %s writes its status and lease over the collector's Report stream", strings.TrimPrefix(u.GetName(), identity.NodeCommonNamePrefix))
	case slices.Contains(u.GetGroups(), OperatorsGroup):
		return true, ""
	case u.GetName() == user.Anonymous && p.Plaintext && p.OperatorToken == "":
		return true, ""
	case u.GetName() == user.Anonymous && p.Plaintext:
		return false, "changes need 'Authorization: Bearer <operator token>' (--auth.operator-token) on this plaintext server"
	}
	return false, fmt.Sprintf("user %q lacks the operator role (certificate organization %s) needed to change the fleet", u.GetName(), OperatorsGroup)
}

// nodePodStatusVerbs are what a node may do to pods/status.
var nodePodStatusVerbs = []string{"update", "patch"}

// nodePodStatus is a write of a pod's status: the one change a node makes
// through the APIs (to pods bound to it; NodeName and the pod service).
func nodePodStatus(a authorizer.Attributes) bool {
	return a.IsResourceRequest() && a.GetAPIGroup() == "" && a.GetResource() == "pods" &&
		a.GetSubresource() == "status" && slices.Contains(nodePodStatusVerbs, a.GetVerb())
}

// NodeName is the node a request comes from, when its caller (either
// door's: the Kubernetes API's authenticated user, or the gRPC caller the
// interceptors put in the context) is a node identity system:node:<name>
// in system:nodes.
func NodeName(ctx context.Context) (string, bool) {
	u, ok := request.UserFrom(ctx)
	if !ok || u == nil || !slices.Contains(u.GetGroups(), NodesGroup) {
		return "", false
	}
	return strings.CutPrefix(u.GetName(), identity.NodeCommonNamePrefix)
}

// RulesFor implements authorizer.RuleResolver: what u may do, as the rules
// SelfSubjectRulesReview lists.
func (p Policy) RulesFor(_ context.Context, u user.Info, _ string) ([]authorizer.ResourceRuleInfo, []authorizer.NonResourceRuleInfo, bool, error) {
	all := []string{"*"}
	rules := []authorizer.ResourceRuleInfo{
		&authorizer.DefaultResourceRuleInfo{Verbs: []string{"create"}, APIGroups: []string{"authorization.k8s.io"}, Resources: selfReviews[:2]},
		&authorizer.DefaultResourceRuleInfo{Verbs: []string{"create"}, APIGroups: []string{"authentication.k8s.io"}, Resources: selfReviews[2:]},
	}
	verbs := readVerbs
	if ok, _ := p.decide(authorizer.AttributesRecord{User: u, Verb: "delete", ResourceRequest: true, Resource: "nodes"}); ok {
		verbs = all
	} else if slices.Contains(u.GetGroups(), NodesGroup) {
		rules = append(rules, &authorizer.DefaultResourceRuleInfo{Verbs: nodePodStatusVerbs, APIGroups: []string{""}, Resources: []string{"pods/status"}})
	}
	rules = append(rules, &authorizer.DefaultResourceRuleInfo{Verbs: verbs, APIGroups: all, Resources: all})
	nonResource := []authorizer.NonResourceRuleInfo{&authorizer.DefaultNonResourceRuleInfo{Verbs: []string{"get"}, NonResourceURLs: all}}
	return rules, nonResource, false, nil
}

// FromTLS is the Kubernetes user of a verified client certificate (the
// x509 authenticator's rule: user = subject CN, groups = organizations),
// nil without one.
func FromTLS(st *tls.ConnectionState) user.Info {
	if st == nil || len(st.VerifiedChains) == 0 || len(st.VerifiedChains[0]) == 0 {
		return nil
	}
	c := st.VerifiedChains[0][0]
	return &user.DefaultInfo{Name: c.Subject.CommonName, Groups: append(slices.Clone(c.Subject.Organization), user.AllAuthenticated)}
}

// FromToken is the operator when token is the configured operator token,
// nil otherwise.
func (p Policy) FromToken(token string) user.Info {
	if p.OperatorToken == "" || token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(p.OperatorToken)) != 1 {
		return nil
	}
	return &user.DefaultInfo{Name: TokenOperator, Groups: []string{OperatorsGroup, user.AllAuthenticated}}
}

// Anonymous is the caller without credentials.
func Anonymous() user.Info {
	return &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}
}

// Caller names who makes a call, for audit logs: the Kubernetes API's
// authenticated user, else the gRPC peer's identity.
func Caller(ctx context.Context) string {
	if u, ok := request.UserFrom(ctx); ok && u != nil {
		return u.GetName()
	}
	return identity.FromContext(ctx).String()
}

// ConditionsAwareAuthorize implements authorizer.Authorizer: the policy
// has no conditions, so its decisions are unconditional.
func (p Policy) ConditionsAwareAuthorize(ctx context.Context, a authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(p.Authorize(ctx, a))
}

// EvaluateConditions implements authorizer.Authorizer (no conditions).
func (p Policy) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

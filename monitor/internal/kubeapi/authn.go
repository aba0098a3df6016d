// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package kubeapi

import (
	"net/http"
	"strings"

	"k8s.io/apiserver/pkg/authentication/authenticator"

	"github.com/nodepulse/nodepulse/monitor/internal/authz"
)

// authn authenticates a request as the gRPC door does (authz.GRPC.User):
// a client certificate verified by the listener's TLS configuration (user
// = CN, groups = O, kube-apiserver's x509 rule), else the operator bearer
// token, else anonymous on a plaintext server. On a TLS server a request
// with neither is 401.
type authn struct{ policy authz.Policy }

func (a authn) AuthenticateRequest(r *http.Request) (*authenticator.Response, bool, error) {
	if u := authz.FromTLS(r.TLS); u != nil {
		return &authenticator.Response{User: u}, true, nil
	}
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		if u := a.policy.FromToken(strings.TrimSpace(tok)); u != nil {
			return &authenticator.Response{User: u}, true, nil
		}
	}
	if a.policy.Plaintext {
		return &authenticator.Response{User: authz.Anonymous()}, true, nil
	}
	return nil, false, nil
}

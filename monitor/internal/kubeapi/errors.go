// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package kubeapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// apiError is a failure answered as a metav1.Status.
type apiError struct{ st metav1.Status }

func (e *apiError) Error() string { return e.st.Message }

func newErr(code int32, reason metav1.StatusReason, msg string) *apiError {
	return &apiError{st: metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Message: msg, Reason: reason, Code: code,
	}}
}

func badRequest(msg string) *apiError { return newErr(400, metav1.StatusReasonBadRequest, msg) }

func notFound(resource, name string) *apiError {
	e := newErr(404, metav1.StatusReasonNotFound, resource+` "`+name+`" not found`)
	e.st.Details = &metav1.StatusDetails{Name: name, Kind: resource}
	return e
}

func methodNotAllowed(msg string) *apiError {
	return newErr(405, metav1.StatusReasonMethodNotAllowed, msg)
}

func invalid(msg string) *apiError { return newErr(422, metav1.StatusReasonInvalid, msg) }

// fromGRPC maps an error of the gRPC services (the same code path as the
// gRPC API) to the Status kube-apiserver answers for the same failure.
func fromGRPC(resource, name string, err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	st, _ := status.FromError(err)
	msg := st.Message()
	var e *apiError
	switch st.Code() {
	case codes.NotFound:
		e = newErr(404, metav1.StatusReasonNotFound, msg)
	case codes.InvalidArgument:
		e = newErr(422, metav1.StatusReasonInvalid, msg)
	case codes.FailedPrecondition, codes.Aborted, codes.AlreadyExists:
		e = newErr(409, metav1.StatusReasonConflict, msg)
	case codes.PermissionDenied:
		e = newErr(403, metav1.StatusReasonForbidden, msg)
	case codes.Unauthenticated:
		e = newErr(401, metav1.StatusReasonUnauthorized, msg)
	case codes.ResourceExhausted:
		e = newErr(429, metav1.StatusReasonTooManyRequests, msg)
	case codes.OutOfRange:
		e = newErr(410, metav1.StatusReasonExpired, msg)
	case codes.Unavailable, codes.DeadlineExceeded:
		e = newErr(503, metav1.StatusReasonServiceUnavailable, msg)
	default:
		e = newErr(500, metav1.StatusReasonInternalError, msg)
	}
	if name != "" || resource != "" {
		e.st.Details = &metav1.StatusDetails{Name: name, Kind: resource}
	}
	return e
}

func writeErr(w http.ResponseWriter, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = newErr(500, metav1.StatusReasonInternalError, err.Error())
	}
	if ae.st.Code == http.StatusTooManyRequests {
		retry := int32(5)
		if ae.st.Details == nil {
			ae.st.Details = &metav1.StatusDetails{}
		}
		ae.st.Details.RetryAfterSeconds = retry
		w.Header().Set("Retry-After", strconv.Itoa(int(retry)))
	}
	writeJSON(w, int(ae.st.Code), ae.st)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package kubeapi

import (
	"errors"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// errNotFound is a lookup that found nothing.
var errNotFound = status.Error(codes.NotFound, "not found")

// statusError maps an error of the services (a gRPC status, the same as
// the gRPC door answers) to the error kube-apiserver returns for the same
// failure, so the generic handlers write upstream's metav1.Status: 404
// NotFound, 422 Invalid with the field path, 409 Conflict, 403, 429, 503.
func statusError(gr schema.GroupResource, kind, name string, err error) error {
	if err == nil {
		return nil
	}
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return apierrors.NewInternalError(err)
	}
	msg := st.Message()
	switch st.Code() {
	case codes.NotFound:
		return apierrors.NewNotFound(gr, name)
	case codes.OutOfRange:
		// A watch from a version the cache no longer holds: "410 Gone".
		return apierrors.NewResourceExpired(msg)
	case codes.InvalidArgument:
		return apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: kind}, name, fieldErrors(msg))
	case codes.AlreadyExists:
		return apierrors.NewAlreadyExists(gr, name)
	case codes.FailedPrecondition, codes.Aborted:
		return apierrors.NewConflict(gr, name, errors.New(msg))
	case codes.PermissionDenied:
		return apierrors.NewForbidden(gr, name, errors.New(msg))
	case codes.Unauthenticated:
		return apierrors.NewUnauthorized(msg)
	case codes.ResourceExhausted:
		return tooManyRequests(st)
	case codes.Unavailable, codes.DeadlineExceeded:
		return apierrors.NewServiceUnavailable(msg)
	}
	return apierrors.NewInternalError(errors.New(msg))
}

// fieldErrors reads the services' "path: reason" messages (package
// validation words them so) as one field error.
func fieldErrors(msg string) field.ErrorList {
	path, why, ok := strings.Cut(msg, ": ")
	if !ok || strings.ContainsAny(path, " \"") {
		return field.ErrorList{field.InternalError(nil, errors.New(msg))}
	}
	return field.ErrorList{&field.Error{Type: field.ErrorTypeInvalid, Field: path, BadValue: field.OmitValueType{}, Detail: why}}
}

// tooManyRequests is an eviction refused by a disruption budget, worded as
// kube-apiserver's eviction subresource does: its fixed message, the
// budget's words as a DisruptionBudget cause, and no retry hint (kubectl
// drain prints the message and retries after its own 5 s).
func tooManyRequests(st *status.Status) error {
	msg, cause := st.Message(), ""
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetMetadata()["cause"] != "" {
			cause = ei.GetMetadata()["cause"]
		}
	}
	msg = strings.TrimSuffix(msg, " "+cause)
	e := apierrors.NewTooManyRequests(msg, 0)
	if cause != "" {
		e.ErrStatus.Details.Causes = append(e.ErrStatus.Details.Causes, metav1.StatusCause{Type: "DisruptionBudget", Message: cause})
	}
	return e
}

// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package validation checks nodepulse input at the API edge: node names,
// labels, taints, tolerations, conditions, resource quantities, addresses,
// timestamps and the sizes of everything that can grow. The collector uses it
// for what reporters send, the monitor for admin and pod input, so both refuse
// the same things with the same words.
//
// Every check returns field errors that carry the path of the offending field
// ("status.capacity[cpu]") and the reason. Status turns the first of them
// into a gRPC InvalidArgument status whose message starts with that path, so
// a caller can always tell which field was refused.
package validation

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// FieldError is one refused field.
type FieldError struct {
	// Field is the path of the field, e.g. "status.capacity[cpu]" or
	// "register.labels[kubernetes.io/hostname]".
	Field string
	// Reason says what is wrong, in words a person fixing the input can use.
	Reason string
}

// Error implements error as "<field>: <reason>".
func (e *FieldError) Error() string { return e.Field + ": " + e.Reason }

// List is every field error of one input, in the order found (within a
// map, by key).
type List []*FieldError

// Error implements error. A List is only ever returned non-empty.
func (l List) Error() string {
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

// Err returns l as an error, or nil when it is empty (never a typed nil).
func (l List) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l
}

// add appends e when it is not nil.
func (l *List) add(e *FieldError) {
	if e != nil {
		*l = append(*l, e)
	}
}

// within prefixes the path of every error in l with parent and returns l.
//
// Why: composite checks (a status, its conditions, its resources) run their
// parts with paths relative to the part (".type", "[3]") and build a full
// path only for a part that fails. The collector checks a status report of
// every node every five minutes and nearly all pass; concatenating a path
// per field checked was a quarter of the garbage of checking one.
func (l List) within(parent string) List {
	for _, e := range l {
		e.Field = parent + e.Field
	}
	return l
}

// sorted orders l by field path, for checks that walk a map: the order
// errors are reported in stays stable without sorting every map checked.
func (l List) sorted() List {
	slices.SortStableFunc(l, func(a, b *FieldError) int { return strings.Compare(a.Field, b.Field) })
	return l
}

// index is the path of element i of field, e.g. "status.conditions[2]".
func index(field string, i int) string { return field + "[" + strconv.Itoa(i) + "]" }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// First returns the first field error in err (a *FieldError or a List), or
// nil when err carries none.
func First(err error) *FieldError {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe
	}
	var l List
	if errors.As(err, &l) && len(l) > 0 {
		return l[0]
	}
	return nil
}

// Status returns err as a gRPC InvalidArgument status whose message is
// "<field>: <reason>" of the first field error, so the field is named first.
// It returns nil for a nil err, and err itself when it is already a gRPC
// status; other errors become InvalidArgument with their text.
func Status(err error) error {
	if err == nil {
		return nil
	}
	if fe := First(err); fe != nil {
		return status.Error(codes.InvalidArgument, fe.Error())
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.InvalidArgument, err.Error())
}

// MetricField reduces a field path to a bounded label for metrics: map keys
// and list indices are user input, so "status.capacity[cpu]" and
// "status.conditions[3].type" become "status.capacity[*]" and
// "status.conditions[*].type".
func MetricField(field string) string {
	var b strings.Builder
	depth := 0
	for _, r := range field {
		switch {
		case r == '[':
			if depth == 0 {
				b.WriteString("[*")
			}
			depth++
		case r == ']' && depth > 0:
			depth--
			if depth == 0 {
				b.WriteByte(']')
			}
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Name syntax, as in Kubernetes (RFC 1123 DNS labels and subdomains, and
// qualified names for label and taint keys).
const (
	// DNS1123SubdomainMaxLength bounds node names and key prefixes.
	DNS1123SubdomainMaxLength = 253
	// DNS1123LabelMaxLength bounds one dot-separated part of a subdomain.
	DNS1123LabelMaxLength = 63
	// QualifiedNameMaxLength bounds the name part of a qualified name.
	QualifiedNameMaxLength = 63
	// LabelValueMaxLength bounds label and taint values.
	LabelValueMaxLength = 63
)

// The character classes below are checked by hand, not by regexp: every
// registration and status report validates its node name, label keys and
// values, and a regexp match was ~4 % of the collector's CPU while 90,000
// reporters registered again after a restart. k8s.io/apimachinery's
// validation helpers are such regexps (about 10x the time and 5 allocations for a
// node name and five labels; docs/adr/0024-field-libraries.md), so they
// are the reference instead: charclass_test.go checks both agree.

func isLowerAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }
func isAlnum(c byte) bool      { return isLowerAlnum(c) || 'A' <= c && c <= 'Z' }

// isDNSLabel: [a-z0-9]([-a-z0-9]*[a-z0-9])?
func isDNSLabel(s string) bool {
	if s == "" || !isLowerAlnum(s[0]) || !isLowerAlnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; c != '-' && !isLowerAlnum(c) {
			return false
		}
	}
	return true
}

// isQualified: ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]
func isQualified(s string) bool {
	if s == "" || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; c != '-' && c != '_' && c != '.' && !isAlnum(c) {
			return false
		}
	}
	return true
}

// DNSSubdomain checks an RFC 1123 subdomain: lower-case alphanumerics, '-'
// and '.', starting and ending alphanumeric, at most 253 characters, each
// dot-separated label at most 63.
func DNSSubdomain(field, s string) *FieldError {
	if s == "" {
		return fieldErr(field, "must not be empty")
	}
	if len(s) > DNS1123SubdomainMaxLength {
		return fieldErr(field, "must be no more than %d characters (got %d)", DNS1123SubdomainMaxLength, len(s))
	}
	for rest := s; ; {
		part, next, more := strings.Cut(rest, ".")
		if len(part) > DNS1123LabelMaxLength {
			return fieldErr(field, "each dot-separated part must be no more than %d characters", DNS1123LabelMaxLength)
		}
		if !isDNSLabel(part) {
			return fieldErr(field, "%q is not a DNS subdomain: lower-case alphanumerics, '-' and '.', starting and ending with an alphanumeric (e.g. 'node-1.example.com')", truncate(s))
		}
		if !more {
			return nil
		}
		rest = next
	}
}

// NodeName checks a node name: a DNS subdomain of at most 253 characters.
func NodeName(field, s string) *FieldError { return DNSSubdomain(field, s) }

// QualifiedName checks a label or taint key: an optional DNS-subdomain
// prefix (at most 253) and '/', then a name of at most 63 characters of
// alphanumerics, '-', '_' and '.', starting and ending alphanumeric.
func QualifiedName(field, s string) *FieldError {
	if s == "" {
		return fieldErr(field, "must not be empty")
	}
	name := s
	if prefix, rest, ok := strings.Cut(s, "/"); ok {
		if prefix == "" {
			return fieldErr(field, "prefix before '/' must not be empty")
		}
		if e := DNSSubdomain(field, prefix); e != nil {
			return fieldErr(field, "prefix %q: %s", truncate(prefix), e.Reason)
		}
		name = rest
	}
	if name == "" {
		return fieldErr(field, "name part must not be empty")
	}
	if len(name) > QualifiedNameMaxLength {
		return fieldErr(field, "name part must be no more than %d characters (got %d)", QualifiedNameMaxLength, len(name))
	}
	if !isQualified(name) {
		return fieldErr(field, "%q is not a qualified name: alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric, with an optional DNS subdomain prefix and '/' (e.g. 'example.com/my-key')", truncate(s))
	}
	return nil
}

// LabelValue checks a label or taint value: empty, or at most 63
// alphanumerics, '-', '_' and '.', starting and ending alphanumeric.
func LabelValue(field, s string) *FieldError {
	if len(s) > LabelValueMaxLength {
		return fieldErr(field, "must be no more than %d characters (got %d)", LabelValueMaxLength, len(s))
	}
	if s != "" && !isQualified(s) {
		return fieldErr(field, "%q is not a valid label value: alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric", truncate(s))
	}
	return nil
}

// Labels checks a label map: at most maxCount entries, qualified-name keys
// and label values.
func Labels(field string, m map[string]string, maxCount int) List {
	var l List
	if len(m) > maxCount {
		return List{fieldErr(field, "must have at most %d entries (got %d)", maxCount, len(m))}
	}
	for _, k := range sortedKeys(m) {
		f := field + "[" + k + "]"
		if e := QualifiedName(f, k); e != nil {
			l.add(fieldErr(f, "key: %s", e.Reason))
			continue
		}
		l.add(LabelValue(f, m[k]))
	}
	return l
}

// truncate keeps error messages bounded when input is huge.
func truncate(s string) string {
	const n = 80
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package convert turns nodepulse's records into the Kubernetes types of
// k8s.io/api and back. nodepulse's messages keep Kubernetes field names
// (their JSON names are the Kubernetes ones), so the way out is generic: a
// message becomes the unstructured map Kubernetes would serialise, and
// apimachinery's converter fills the typed object from it. The few
// differences (int-or-string, nodepulse-only fields) are fixed per kind.
package convert

import (
	"fmt"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// toMap renders a message as Kubernetes JSON would: JSON field names,
// numbers as numbers (protojson writes 64-bit integers as strings, which
// the typed decoder refuses), times as RFC 3339 seconds.
func toMap(m protoreflect.Message) map[string]any {
	out := map[string]any{}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		out[fd.JSONName()] = fieldValue(fd, v)
		return true
	})
	return out
}

func fieldValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) any {
	switch {
	case fd.IsList():
		l := v.List()
		out := make([]any, l.Len())
		for i := range out {
			out[i] = scalar(fd, l.Get(i))
		}
		return out
	case fd.IsMap():
		out := map[string]any{}
		v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
			out[k.String()] = scalar(fd.MapValue(), mv)
			return true
		})
		return out
	}
	return scalar(fd, v)
}

func scalar(fd protoreflect.FieldDescriptor, v protoreflect.Value) any {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		msg := v.Message()
		switch t := msg.Interface().(type) {
		case *timestamppb.Timestamp:
			// Micro precision: MicroTime fields (lease times) need it, and
			// Time fields parse it as RFC 3339.
			return t.AsTime().UTC().Format(metav1.RFC3339Micro)
		case *durationpb.Duration:
			return t.AsDuration().String()
		case *structpb.Struct:
			// managedFields' fieldsV1: the JSON object it holds.
			return t.AsMap()
		}
		return toMap(msg)
	case protoreflect.EnumKind:
		return string(fd.Enum().Values().ByNumber(v.Enum()).Name())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return v.Int()
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return int64(v.Uint())
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return v.Float()
	case protoreflect.BoolKind:
		return v.Bool()
	case protoreflect.BytesKind:
		return v.Bytes()
	}
	return v.String()
}

// into fills obj (a pointer to a k8s.io/api type) from m after fix edits
// the map; fields of m the Kubernetes type lacks are dropped.
func into(m proto.Message, obj any, fix func(map[string]any)) error {
	u := toMap(m.ProtoReflect())
	if fix != nil {
		fix(u)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, obj); err != nil {
		return fmt.Errorf("convert %T: %w", m, err)
	}
	return nil
}

// sub returns m[k] as a map, creating it.
func sub(m map[string]any, k string) map[string]any {
	if s, ok := m[k].(map[string]any); ok {
		return s
	}
	s := map[string]any{}
	m[k] = s
	return s
}

// intOrString rewrites the nodepulse IntOrString message at m[k] to the
// Kubernetes int-or-string value.
func intOrString(m map[string]any, k string) {
	v, ok := m[k].(map[string]any)
	if !ok {
		return
	}
	if s, ok := v["strValue"]; ok {
		m[k] = s
	} else if i, ok := v["intValue"]; ok {
		m[k] = i
	} else {
		m[k] = int64(0)
	}
}

// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package kubeapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	podv1 "github.com/nodepulse/nodepulse/gen/nodepulse/pod/v1"
	"github.com/nodepulse/nodepulse/monitor/internal/api"
	"github.com/nodepulse/nodepulse/monitor/internal/kubeapi/convert"
	"github.com/nodepulse/nodepulse/monitor/internal/kubeapi/patch"
)

// ForceStatusUpdateAnnotation asks the node's agent for a status update
// now (kubelet.kubernetes.io/force-status-update): here the same forced
// update as NodeService.RequestStatusUpdate.
const ForceStatusUpdateAnnotation = "kubelet.kubernetes.io/force-status-update"

// maxBody bounds a request body.
const maxBody = 3 << 20

// decoder reads request bodies in JSON or protobuf: client-go's typed
// clients send DeleteOptions as protobuf.
var decoder = func() runtime.Decoder {
	sc := runtime.NewScheme()
	metav1.AddToGroupVersion(sc, schema.GroupVersion{Version: "v1"})
	_ = policyv1.AddToScheme(sc)
	_ = corev1.AddToScheme(sc)
	return serializer.NewCodecFactory(sc).UniversalDeserializer()
}()

func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, badRequest("read body: " + err.Error())
	}
	if len(b) > maxBody {
		return nil, newErr(413, metav1.StatusReasonRequestEntityTooLarge, "request body too large")
	}
	return b, nil
}

// patchNode applies a patch to the served node and turns the difference
// into the NodeService writes an operator makes through gRPC: cordon or
// uncordon, add or remove taints, set labels and annotations. Anything else
// that changes (status, provider ID) is refused: those keys have other
// writers (the collector, the monitor's leader).
func (s *Server) patchNode(w http.ResponseWriter, r *http.Request, name string) error {
	ctx := r.Context()
	body, err := readBody(r)
	if err != nil {
		return err
	}
	cur, err := s.getNode(ctx, "", name)
	if err != nil {
		return err
	}
	old := cur.obj.(*corev1.Node)
	orig, err := json.Marshal(old)
	if err != nil {
		return err
	}
	patched, err := patch.Apply(r.Header.Get("Content-Type"), orig, body, corev1.Node{})
	if errors.Is(err, patch.ErrUnsupported) {
		return newErr(415, metav1.StatusReasonUnsupportedMediaType, err.Error())
	}
	if err != nil {
		return badRequest("apply patch: " + err.Error())
	}
	want := &corev1.Node{}
	if err := json.Unmarshal(patched, want); err != nil {
		return badRequest("patched node: " + err.Error())
	}
	if want.Name != name {
		return badRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", want.Name, name))
	}
	if rv := want.ResourceVersion; rv != old.ResourceVersion {
		return newErr(409, metav1.StatusReasonConflict, fmt.Sprintf(`Operation cannot be fulfilled on nodes %q: the object has been modified; please apply your changes to the latest version and try again (resourceVersion %s, current %s)`, name, rv, old.ResourceVersion))
	}
	// Compare like with like: the original after the same JSON round trip
	// (times lose their sub-second part in JSON).
	oldRT := &corev1.Node{}
	if err := json.Unmarshal(orig, oldRT); err != nil {
		return err
	}
	if err := onlyWritable(oldRT, want); err != nil {
		return err
	}
	if r.URL.Query().Get("dryRun") != "" {
		writeJSON(w, 200, want)
		return nil
	}
	if err := s.writeNode(ctx, name, old, want); err != nil {
		return err
	}
	o, err := s.getNode(ctx, "", name)
	if err != nil {
		return err
	}
	writeJSON(w, 200, o.obj)
	return nil
}

// onlyWritable refuses a change outside labels, annotations,
// spec.unschedulable and spec.taints.
func onlyWritable(old, want *corev1.Node) error {
	a, b := old.DeepCopy(), want.DeepCopy()
	for _, n := range []*corev1.Node{a, b} {
		n.Labels, n.Annotations, n.ManagedFields = nil, nil, nil
		n.Spec.Unschedulable, n.Spec.Taints = false, nil
		n.TypeMeta = metav1.TypeMeta{}
	}
	if !equality.Semantic.DeepEqual(a.Spec, b.Spec) {
		return invalid(fmt.Sprintf("Node %q is invalid: spec: only spec.unschedulable and spec.taints may be changed through this API", old.Name))
	}
	if !equality.Semantic.DeepEqual(a.Status, b.Status) {
		return invalid(fmt.Sprintf("Node %q is invalid: status: the node's status is written by its reporter and the monitor, not through this API", old.Name))
	}
	if !equality.Semantic.DeepEqual(a.ObjectMeta, b.ObjectMeta) {
		return invalid(fmt.Sprintf("Node %q is invalid: metadata: only metadata.labels and metadata.annotations may be changed", old.Name))
	}
	return nil
}

type taintKey struct{ key, effect string }

func taintMap(ts []corev1.Taint) map[taintKey]corev1.Taint {
	m := make(map[taintKey]corev1.Taint, len(ts))
	for _, t := range ts {
		m[taintKey{t.Key, string(t.Effect)}] = t
	}
	return m
}

// writeNode makes the change from old to want as one NodeService write
// (UpdateNode): a cordon, the taints and the metadata go together in one
// compare-and-swap of nodes/<name>, every part checked before it, so a
// patch that is refused in part changes nothing.
func (s *Server) writeNode(ctx context.Context, name string, old, want *corev1.Node) error {
	var u api.NodeUpdate
	if want.Spec.Unschedulable != old.Spec.Unschedulable {
		u.Unschedulable = &want.Spec.Unschedulable
	}
	ot, nt := taintMap(old.Spec.Taints), taintMap(want.Spec.Taints)
	for _, t := range old.Spec.Taints {
		if _, ok := nt[taintKey{t.Key, string(t.Effect)}]; ok {
			continue
		}
		if t.Key == corev1.TaintNodeUnschedulable && u.Unschedulable != nil {
			continue // follows the cordon
		}
		u.RemoveTaints = append(u.RemoveTaints, convert.Taint(t))
	}
	for _, t := range want.Spec.Taints {
		if o, ok := ot[taintKey{t.Key, string(t.Effect)}]; ok && o.Value == t.Value {
			continue
		}
		u.AddTaints = append(u.AddTaints, convert.Taint(t))
	}
	if !maps.Equal(old.Labels, want.Labels) {
		u.Labels = want.Labels
		if u.Labels == nil {
			u.Labels = map[string]string{}
		}
	}
	if !maps.Equal(old.Annotations, want.Annotations) {
		u.Annotations = want.Annotations
		if u.Annotations == nil {
			u.Annotations = map[string]string{}
		}
	}
	if _, err := s.b.Nodes.UpdateNode(ctx, name, u); err != nil {
		return fromGRPC("nodes", name, err)
	}
	if v, ok := want.Annotations[ForceStatusUpdateAnnotation]; ok && v != old.Annotations[ForceStatusUpdateAnnotation] {
		if _, err := s.b.Nodes.RequestStatusUpdate(ctx, &nodev1.RequestStatusUpdateRequest{Name: name}); err != nil {
			// The annotation is kept, as in Kubernetes; the update is best
			// effort (a node on no followed collector cannot be asked).
			s.lg.Warn("force-status-update annotation: the status update was not requested", zap.String("node", name), zap.Error(err))
		}
	}
	return nil
}

// deleteOptions reads DeleteOptions from the body (JSON or protobuf) and
// the query.
func deleteOptions(r *http.Request) (*metav1.DeleteOptions, error) {
	opts := &metav1.DeleteOptions{}
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	if len(strings.TrimSpace(string(body))) > 0 {
		if _, _, err := decoder.Decode(body, &schema.GroupVersionKind{Version: "v1", Kind: "DeleteOptions"}, opts); err != nil {
			return nil, badRequest("DeleteOptions: " + err.Error())
		}
	}
	if g := r.URL.Query().Get("gracePeriodSeconds"); g != "" {
		n, err := strconv.ParseInt(g, 10, 64)
		if err != nil {
			return nil, badRequest("gracePeriodSeconds: " + err.Error())
		}
		opts.GracePeriodSeconds = &n
	}
	return opts, nil
}

// deletePod is PodService.DeletePod: graceful unless the grace period is
// 0, with the uid and resourceVersion preconditions.
func (s *Server) deletePod(w http.ResponseWriter, r *http.Request, ns, name string) error {
	opts, err := deleteOptions(r)
	if err != nil {
		return err
	}
	req := &podv1.DeletePodRequest{Namespace: ns, Name: name, GracePeriodSeconds: opts.GracePeriodSeconds}
	if p := opts.Preconditions; p != nil {
		if p.UID != nil {
			req.Uid = string(*p.UID)
		}
		if p.ResourceVersion != nil {
			req.ResourceVersion = *p.ResourceVersion
		}
	}
	if len(opts.DryRun) > 0 {
		o, err := s.getPod(r.Context(), ns, name)
		if err != nil {
			return err
		}
		writeJSON(w, 200, o.obj)
		return nil
	}
	resp, err := s.b.Pods.DeletePod(r.Context(), req)
	if err != nil {
		return notFoundOr("pods", name, err)
	}
	o, err := podObject(resp.GetPod())
	if err != nil {
		return err
	}
	writeJSON(w, 200, o.obj)
	return nil
}

// evictPod is PodService.EvictPod: the disruption budgets decide (429 when
// one allows no disruption now).
func (s *Server) evictPod(w http.ResponseWriter, r *http.Request, ns, name string) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	ev := &policyv1.Eviction{}
	if len(body) > 0 {
		// policy/v1 and v1beta1 Evictions share their shape.
		if err := json.Unmarshal(body, ev); err != nil {
			if _, _, perr := decoder.Decode(body, nil, ev); perr != nil {
				return badRequest("Eviction: " + err.Error())
			}
		}
	}
	if ev.Name != "" && ev.Name != name {
		return badRequest(fmt.Sprintf("name in URL does not match name in Eviction object (%s, %s)", name, ev.Name))
	}
	req := &podv1.EvictPodRequest{Namespace: ns, Name: name}
	if d := ev.DeleteOptions; d != nil {
		req.GracePeriodSeconds = d.GracePeriodSeconds
		if d.Preconditions != nil && d.Preconditions.UID != nil {
			req.Uid = string(*d.Preconditions.UID)
		}
	}
	if _, err := s.b.Pods.EvictPod(r.Context(), req); err != nil {
		ae := fromGRPC("pods", name, err)
		if ae.st.Code == 422 {
			return notFound("pods", name)
		}
		return ae
	}
	writeJSON(w, 201, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess})
	return nil
}

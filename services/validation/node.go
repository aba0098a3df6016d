// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package validation

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/api/resource"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// Limits bound everything in the input that can grow. Zero values are not
// "unlimited": use DefaultLimits and change what you need.
type Limits struct {
	// MaxLabels per object.
	MaxLabels int
	// MaxTaints per node and MaxTolerations per pod.
	MaxTaints      int
	MaxTolerations int
	// MaxConditions per status.
	MaxConditions int
	// MaxAddresses per status.
	MaxAddresses int
	// MaxResources per capacity or allocatable map.
	MaxResources int
	// MaxReasonLength and MaxMessageLength bound condition reasons and
	// messages (Kubernetes allows 1 KiB and 32 KiB).
	MaxReasonLength  int
	MaxMessageLength int
	// MaxInfoLength bounds each free-text system info string.
	MaxInfoLength int
}

// DefaultLimits are generous for real machines and small enough that one
// node's status stays a few KiB in etcd.
func DefaultLimits() Limits {
	return Limits{
		MaxLabels:        64,
		MaxTaints:        32,
		MaxTolerations:   32,
		MaxConditions:    16,
		MaxAddresses:     32,
		MaxResources:     64,
		MaxReasonLength:  1024,
		MaxMessageLength: 4096,
		MaxInfoLength:    256,
	}
}

// Resource bounds: no machine has more; larger values are typos or attacks
// that would poison capacity arithmetic.
//
// Each bound is built from an int64, not parsed: resource.Quantity compares
// two int64 amounts without allocating, while a parsed "1Ei" is held as an
// arbitrary-precision decimal and every comparison with it allocates (5
// allocations per quantity checked; see docs/adr/0024-field-libraries.md).
var (
	maxCPU    = *resource.NewQuantity(1_000_000, resource.DecimalSI) // one million cores
	maxBytes  = *resource.NewQuantity(1<<60, resource.BinarySI)      // 1Ei: memory, storage, hugepages
	maxPods   = *resource.NewQuantity(1_000_000, resource.DecimalSI)
	maxOther  = *resource.NewQuantity(1_000_000_000_000, resource.DecimalSI) // 1T: extended resources (devices)
	byteNames = []string{"memory", "ephemeral-storage", "storage"}
)

// MaxQuantityLength bounds the text of a quantity; longer strings are
// refused before parsing, so absurd input costs nothing (resource.
// ParseQuantity itself has no bound).
const MaxQuantityLength = 64

// ResourceBound returns the largest accepted quantity of resource name.
func ResourceBound(name string) resource.Quantity {
	switch {
	case name == "cpu":
		return maxCPU
	case name == "pods":
		return maxPods
	case slices.Contains(byteNames, name), strings.HasPrefix(name, "hugepages-"):
		return maxBytes
	}
	return maxOther
}

// ParseQuantity is resource.ParseQuantity behind checks of our own that
// keep absurd input cheap and mistakes visible: at most MaxQuantityLength
// characters; a number before the suffix (the library reads a suffix or a
// sign alone, "Ki", "-", "e3", as zero); and a decimal exponent within
// ±MaxQuantityExponent (the library keeps the exponent as an int32 and
// computes with 10^exp, so "1e999999999" would cost seconds and gigabytes
// to compare with a bound).
func ParseQuantity(s string) (resource.Quantity, error) {
	if len(s) > MaxQuantityLength {
		return resource.Quantity{}, fmt.Errorf("quantity longer than %d characters", MaxQuantityLength)
	}
	if err := quantitySyntax(s); err != nil {
		return resource.Quantity{}, fmt.Errorf("%q is not a quantity (want e.g. 4, 500m, 16Gi, 1e3): %w", truncate(s), err)
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("%q is not a quantity (want e.g. 4, 500m, 16Gi, 1e3): %w", truncate(s), err)
	}
	return q, nil
}

// MaxQuantityExponent bounds the decimal exponent of a quantity ("1e30").
const MaxQuantityExponent = 30

// quantitySyntax checks what resource.ParseQuantity lets through: the
// number part must have a digit, and a decimal exponent must be small.
func quantitySyntax(s string) error {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for ; i < len(s) && ('0' <= s[i] && s[i] <= '9' || s[i] == '.'); i++ {
		if s[i] != '.' {
			digits++
		}
	}
	if digits == 0 {
		return errors.New("no number before the suffix")
	}
	if suf := s[i:]; len(suf) > 1 && (suf[0] == 'e' || suf[0] == 'E') {
		if exp, err := strconv.ParseInt(suf[1:], 10, 64); err == nil && (exp > MaxQuantityExponent || exp < -MaxQuantityExponent) {
			return fmt.Errorf("exponent out of range (at most ±%d)", MaxQuantityExponent)
		}
	}
	return nil
}

// Quantity checks one resource quantity: Kubernetes syntax, not negative, at
// most the resource's bound.
func Quantity(field, name, s string) *FieldError {
	q, err := ParseQuantity(s)
	if err != nil {
		return fieldErr(field, "%v", err)
	}
	if q.Sign() < 0 {
		return fieldErr(field, "must not be negative (got %s)", s)
	}
	if b := ResourceBound(name); q.Cmp(b) > 0 {
		return fieldErr(field, "%s exceeds the upper bound %s for %q", s, b.String(), name)
	}
	return nil
}

// Resources checks a capacity or allocatable map: qualified-name resource
// names and bounded quantities.
func Resources(field string, m map[string]string, lim Limits) List {
	if len(m) > lim.MaxResources {
		return List{fieldErr(field, "must have at most %d resources (got %d)", lim.MaxResources, len(m))}
	}
	var l List
	for k, v := range m {
		if e := QualifiedName("", k); e != nil {
			l.add(fieldErr(field+"["+k+"]", "resource name: %s", e.Reason))
			continue
		}
		if e := Quantity("", k, v); e != nil {
			e.Field = field + "[" + k + "]"
			l.add(e)
		}
	}
	return l.sorted() // one error per key: by key, as a sorted walk would find them
}

// TaintEffects are the accepted taint effects.
var TaintEffects = []string{nodemodel.NoSchedule, nodemodel.PreferNoSchedule, nodemodel.NoExecute}

// Taint checks one taint: qualified-name key, label value, effect enum, and
// time_added not in the future.
func Taint(field string, t *nodev1.Taint, now time.Time, lim Limits) List {
	var l List
	if t == nil {
		return List{fieldErr(field, "must not be null")}
	}
	l.add(QualifiedName(field+".key", t.GetKey()))
	l.add(LabelValue(field+".value", t.GetValue()))
	if !slices.Contains(TaintEffects, t.GetEffect()) {
		l.add(fieldErr(field+".effect", "%q is not one of %s", truncate(t.GetEffect()), strings.Join(TaintEffects, ", ")))
	}
	if t.TimeAdded != nil {
		l.add(Timestamp(field+".timeAdded", t.GetTimeAdded()))
	}
	return l
}

// Taints checks a taint list: bounded, each valid, no two with the same
// (key, effect), which is a taint's identity.
func Taints(field string, ts []*nodev1.Taint, now time.Time, lim Limits) List {
	if len(ts) > lim.MaxTaints {
		return List{fieldErr(field, "must have at most %d taints (got %d)", lim.MaxTaints, len(ts))}
	}
	var l List
	seen := map[nodemodel.TaintKeyEffect]bool{}
	for i, t := range ts {
		f := field + "[" + strconv.Itoa(i) + "]"
		l = append(l, Taint(f, t, now, lim)...)
		id := nodemodel.TaintKeyEffect{Key: t.GetKey(), Effect: t.GetEffect()}
		if seen[id] {
			l.add(fieldErr(f, "duplicate taint %s:%s (key and effect identify a taint)", truncate(t.GetKey()), t.GetEffect()))
		}
		seen[id] = true
	}
	return l
}

// Toleration operators.
const (
	OpEqual  = "Equal"
	OpExists = "Exists"
	OpLt     = "Lt"
	OpGt     = "Gt"
)

// Toleration checks one toleration with the rules of Kubernetes: operator
// Equal (default when empty), Exists, Lt or Gt; an empty key only with
// Exists; Exists has no value; Lt and Gt compare integers, so their value
// must be one (no sign, no leading zero); the effect, when set, is a taint
// effect; toleration_seconds only with NoExecute, the only effect that
// evicts.
func Toleration(field string, t *nodev1.Toleration) List {
	if t == nil {
		return List{fieldErr(field, "must not be null")}
	}
	var l List
	op := t.GetOperator()
	switch op {
	case "", OpEqual, OpExists, OpLt, OpGt:
	default:
		return List{fieldErr(field+".operator", "%q is not one of Equal, Exists, Lt, Gt", truncate(op))}
	}
	if t.GetKey() == "" {
		if op != OpExists {
			l.add(fieldErr(field+".key", "must be set unless operator is Exists (an empty key with Exists tolerates every taint)"))
		}
	} else {
		l.add(QualifiedName(field+".key", t.GetKey()))
	}
	switch op {
	case OpExists:
		if t.GetValue() != "" {
			l.add(fieldErr(field+".value", "must be empty when operator is Exists"))
		}
	case OpLt, OpGt:
		if !isPlainInt(t.GetValue()) {
			l.add(fieldErr(field+".value", "must be an integer without sign or leading zero when operator is %s (got %q)", op, truncate(t.GetValue())))
		}
	default:
		l.add(LabelValue(field+".value", t.GetValue()))
	}
	if e := t.GetEffect(); e != "" && !slices.Contains(TaintEffects, e) {
		l.add(fieldErr(field+".effect", "%q is not empty or one of %s", truncate(e), strings.Join(TaintEffects, ", ")))
	}
	if t.TolerationSeconds != nil && t.GetEffect() != nodemodel.NoExecute {
		l.add(fieldErr(field+".tolerationSeconds", "may only be set when effect is NoExecute"))
	}
	return l
}

// Tolerations checks a bounded toleration list.
func Tolerations(field string, ts []*nodev1.Toleration, lim Limits) List {
	if len(ts) > lim.MaxTolerations {
		return List{fieldErr(field, "must have at most %d tolerations (got %d)", lim.MaxTolerations, len(ts))}
	}
	var l List
	for i, t := range ts {
		l = append(l, Toleration(field+"["+strconv.Itoa(i)+"]", t)...)
	}
	return l
}

// isPlainInt: an int64 in canonical decimal form, as Lt/Gt matching needs.
func isPlainInt(s string) bool {
	if s == "" || s[0] == '+' || (len(s) > 1 && s[0] == '0') || strings.HasPrefix(s, "-0") {
		return false
	}
	_, err := strconv.ParseInt(s, 10, 64)
	return err == nil
}

// ConditionStatuses are the accepted condition statuses.
var ConditionStatuses = []string{nodemodel.True, nodemodel.False, nodemodel.Unknown}

// Condition checks one node condition: a qualified-name type (the well-known
// ones or custom ones such as "example.com/GPUHealthy"), a status of True,
// False or Unknown, bounded reason and message, and times not in the future.
func Condition(field string, c *nodev1.NodeCondition, now time.Time, lim Limits) List {
	if c == nil {
		return List{fieldErr(field, "must not be null")}
	}
	var l List
	l.add(QualifiedName(".type", c.GetType()))
	if !slices.Contains(ConditionStatuses, c.GetStatus()) {
		l.add(fieldErr(".status", "%q is not one of True, False, Unknown", truncate(c.GetStatus())))
	}
	if len(c.GetReason()) > lim.MaxReasonLength {
		l.add(fieldErr(".reason", "must be no more than %d characters (got %d)", lim.MaxReasonLength, len(c.GetReason())))
	}
	if len(c.GetMessage()) > lim.MaxMessageLength {
		l.add(fieldErr(".message", "must be no more than %d characters (got %d)", lim.MaxMessageLength, len(c.GetMessage())))
	}
	if c.LastHeartbeatTime != nil {
		l.add(Timestamp(".lastHeartbeatTime", c.GetLastHeartbeatTime()))
	}
	if c.LastTransitionTime != nil {
		l.add(Timestamp(".lastTransitionTime", c.GetLastTransitionTime()))
	}
	return l.within(field)
}

// Conditions checks a bounded condition list with unique types.
func Conditions(field string, cs []*nodev1.NodeCondition, now time.Time, lim Limits) List {
	if len(cs) > lim.MaxConditions {
		return List{fieldErr(field, "must have at most %d conditions (got %d)", lim.MaxConditions, len(cs))}
	}
	var l List
	seen := map[string]bool{}
	for i, c := range cs {
		lc := Condition("", c, now, lim)
		if seen[c.GetType()] {
			lc.add(fieldErr(".type", "duplicate condition type %q", truncate(c.GetType())))
		}
		seen[c.GetType()] = true
		if len(lc) > 0 {
			l = append(l, lc.within(index(field, i))...)
		}
	}
	return l
}

// AddressTypes are the accepted address types.
var AddressTypes = []string{nodemodel.AddressHostname, nodemodel.AddressInternalIP, nodemodel.AddressExternalIP,
	nodemodel.AddressInternalDNS, nodemodel.AddressExternalDNS}

// Address checks one node address: the type enum; an IP literal for the *IP
// types; a DNS subdomain for the *DNS types and Hostname.
func Address(field string, a *nodev1.NodeAddress) List {
	if a == nil {
		return List{fieldErr(field, "must not be null")}
	}
	switch a.GetType() {
	case nodemodel.AddressInternalIP, nodemodel.AddressExternalIP:
		ip, err := netip.ParseAddr(a.GetAddress())
		if err != nil || ip.Zone() != "" {
			return List{fieldErr(field+".address", "%q is not an IP address, which type %s needs", truncate(a.GetAddress()), a.GetType())}
		}
	case nodemodel.AddressInternalDNS, nodemodel.AddressExternalDNS, nodemodel.AddressHostname:
		if e := DNSSubdomain(field+".address", a.GetAddress()); e != nil {
			return List{fieldErr(e.Field, "type %s needs a DNS name: %s", a.GetType(), e.Reason)}
		}
	default:
		return List{fieldErr(field+".type", "%q is not one of %s", truncate(a.GetType()), strings.Join(AddressTypes, ", "))}
	}
	return nil
}

// Addresses checks a bounded address list without exact duplicates.
func Addresses(field string, as []*nodev1.NodeAddress, lim Limits) List {
	if len(as) > lim.MaxAddresses {
		return List{fieldErr(field, "must have at most %d addresses (got %d)", lim.MaxAddresses, len(as))}
	}
	var l List
	seen := map[[2]string]bool{}
	for i, a := range as {
		la := Address("", a)
		id := [2]string{a.GetType(), a.GetAddress()}
		if seen[id] {
			la.add(fieldErr("", "duplicate address %s %s", a.GetType(), truncate(a.GetAddress())))
		}
		seen[id] = true
		if len(la) > 0 {
			l = append(l, la.within(index(field, i))...)
		}
	}
	return l
}

// Timestamp checks a protobuf timestamp a client sent: set, well-formed
// (years 1 to 9999, nanos in range: CheckValid) and not before TimeFloor.
// Nothing else: a time is never refused for being far from the checker's
// clock. Machines with wrong clocks are common (no NTP at boot, a dead RTC
// battery, a VM restored from a snapshot), and refusing what they send
// turned a live machine NotReady; liveness is judged by the control
// plane's own receipt times, never by these (spec §6.2, ADR 0036).
func Timestamp(field string, ts *timestamppb.Timestamp) *FieldError {
	if ts == nil {
		return fieldErr(field, "must be set")
	}
	if err := ts.CheckValid(); err != nil {
		return fieldErr(field, "invalid timestamp: %v", err)
	}
	if t := ts.AsTime(); t.Before(TimeFloor) {
		return fieldErr(field, "%s is before %s: not a time any clock reads", t.UTC().Format(time.RFC3339Nano), TimeFloor.Format(time.RFC3339))
	}
	return nil
}

// NodeStatus checks everything a reporter may send as status.
func NodeStatus(field string, s *nodev1.NodeStatus, now time.Time, lim Limits) List {
	if s == nil {
		return List{fieldErr(field, "must be set")}
	}
	var l List
	l = append(l, Resources(".capacity", s.GetCapacity(), lim)...)
	l = append(l, Resources(".allocatable", s.GetAllocatable(), lim)...)
	// Allocatable is capacity minus reservations: more allocatable than
	// capacity would let schedulers over-commit the machine.
	var over List
	for k, a := range s.GetAllocatable() {
		c, ok := s.GetCapacity()[k]
		if !ok {
			continue
		}
		qa, ea := resource.ParseQuantity(a)
		qc, ec := resource.ParseQuantity(c)
		if ea == nil && ec == nil && qa.Cmp(qc) > 0 {
			over.add(fieldErr(".allocatable["+k+"]", "%s exceeds capacity %s", a, c))
		}
	}
	l = append(l, over.sorted()...)
	l = append(l, Conditions(".conditions", s.GetConditions(), now, lim)...)
	l = append(l, Addresses(".addresses", s.GetAddresses(), lim)...)
	if p := s.GetDaemonEndpoints().GetReporterEndpoint().GetPort(); p < 0 || p > 65535 {
		l.add(fieldErr(".daemonEndpoints.reporterEndpoint.Port", "%d is not a port number (0-65535)", p))
	}
	if ni := s.GetNodeInfo(); ni != nil {
		for _, kv := range []struct{ name, v string }{
			{"machineID", ni.GetMachineId()}, {"systemUUID", ni.GetSystemUuid()}, {"bootID", ni.GetBootId()},
			{"kernelVersion", ni.GetKernelVersion()}, {"osImage", ni.GetOsImage()},
			{"containerRuntimeVersion", ni.GetContainerRuntimeVersion()}, {"reporterVersion", ni.GetReporterVersion()},
			{"operatingSystem", ni.GetOperatingSystem()}, {"architecture", ni.GetArchitecture()},
		} {
			if len(kv.v) > lim.MaxInfoLength {
				l.add(fieldErr(".nodeInfo."+kv.name, "must be no more than %d characters (got %d)", lim.MaxInfoLength, len(kv.v)))
			}
		}
	}
	return l.within(field)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package app

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	nodev1 "github.com/nodepulse/nodepulse/gen/nodepulse/node/v1"
	"github.com/nodepulse/nodepulse/reporter/internal/heartbeat"
	"github.com/nodepulse/nodepulse/reporter/internal/podagent"
	"github.com/nodepulse/nodepulse/reporter/runtimeinfo"
	"github.com/nodepulse/nodepulse/reporter/setters"
	"github.com/nodepulse/nodepulse/services/admin"
	"github.com/nodepulse/nodepulse/services/flagenv"
	"github.com/nodepulse/nodepulse/services/grpcclient"
	"github.com/nodepulse/nodepulse/services/logging"
	"github.com/nodepulse/nodepulse/services/nodemodel"
)

// EnvPrefix is the prefix of every environment variable (NODEPULSE_NODE_NAME ...).
const EnvPrefix = "NODEPULSE"

// Config of the reporter. The timing fields carry the kubelet's defaults and
// constraints: the monitor's grace period (40s by default) must exceed
// several lease renew intervals (LeaseDurationSeconds/4 = 10s), so that
// losing one or two renewals never marks a healthy node Unknown.
type Config struct {
	// NodeName identifies the node (default: host name, lower-cased).
	NodeName string
	// NodeIP forces the InternalIP; empty detects it (spec §5.1).
	NodeIP string
	// HostRoot is where the host's filesystem is mounted ("/" on the host).
	HostRoot string
	// MaxPods is the pods capacity (110).
	MaxPods int
	// KubeReserved and SystemReserved: resource=quantity pairs subtracted
	// from capacity for allocatable.
	KubeReserved   flagenv.StringMap
	SystemReserved flagenv.StringMap
	// EvictionHard thresholds in kubelet syntax; setting it replaces every
	// default threshold.
	EvictionHard string
	// EvictionPressureTransitionPeriod keeps a pressure condition True this
	// long after its threshold was last crossed (5m).
	EvictionPressureTransitionPeriod time.Duration
	// NodeLabels are added to the registration labels.
	NodeLabels flagenv.StringMap
	// RegisterWithTaints: key[=value]:Effect, registered at creation.
	RegisterWithTaints flagenv.StringList
	// RegisterSchedulable: false registers the node cordoned.
	RegisterSchedulable bool
	// Zone and Region become topology.kubernetes.io labels, which the
	// monitor uses to group nodes for disruption rate limits.
	Zone, Region string
	// StatusUpdateFrequency: how often status is computed (10s).
	StatusUpdateFrequency time.Duration
	// StatusReportFrequency: how often an unchanged status is still sent
	// (5m); defaults to StatusUpdateFrequency when only that is set.
	StatusReportFrequency time.Duration
	// LeaseDurationSeconds (40): renewals every quarter of it. The monitor's
	// grace period must be larger than one renew interval plus jitter.
	LeaseDurationSeconds int
	// ShutdownTimeout bounds the stop (Leaving exchange, admin drain).
	ShutdownTimeout time.Duration
	// StaticPods is the directory of static pod manifests (the kubelet's
	// staticPodPath); each gets a mirror pod in the API. Empty: none.
	StaticPods string
	// PodReconcilePeriod: a pod bound to the node is written at most once
	// per period (the kubelet status manager's 10 s).
	PodReconcilePeriod time.Duration

	// ExternalAddresses: IPs (ExternalIP) and DNS names (ExternalDNS) the
	// node is reachable at from outside; nothing else can know them
	// without a cloud provider.
	ExternalAddresses externalAddresses
	// ContainerRuntimeEndpoints (CRI sockets, tried in order) and
	// DockerEndpoint (Docker Engine API socket) are where the runtime's
	// version is asked for (package runtimeinfo); empty turns a kind off.
	ContainerRuntimeEndpoints flagenv.StringList
	DockerEndpoint            string

	Collector grpcclient.Config
	Admin     admin.Config
	Log       logging.Config
}

// DefaultConfig returns the defaults (node name from the host name).
func DefaultConfig() Config {
	hb := heartbeat.DefaultConfig()
	return Config{
		NodeName:                         defaultNodeName(),
		HostRoot:                         "/",
		MaxPods:                          110,
		EvictionHard:                     setters.DefaultEvictionHard,
		EvictionPressureTransitionPeriod: setters.DefaultPressureHoldPeriod,
		RegisterSchedulable:              true,
		StatusUpdateFrequency:            hb.StatusUpdateFrequency,
		StatusReportFrequency:            hb.StatusReportFrequency,
		LeaseDurationSeconds:             int(hb.LeaseDurationSeconds),
		ShutdownTimeout:                  10 * time.Second,
		PodReconcilePeriod:               podagent.DefaultReconcilePeriod,
		ContainerRuntimeEndpoints:        append(flagenv.StringList(nil), runtimeinfo.DefaultCRIEndpoints...),
		DockerEndpoint:                   runtimeinfo.DefaultDockerEndpoint,
		Collector: grpcclient.Config{
			Addresses:        fmt.Sprintf("127.0.0.1:%d", 9090),
			KeepaliveTime:    grpcclient.DefaultKeepaliveTime,
			KeepaliveTimeout: grpcclient.DefaultKeepaliveTimeout,
			MaxRecvMsgSize:   16 << 20,
		},
		Admin: admin.Config{ListenAddress: fmt.Sprintf(":%d", admin.ReporterAdmin)},
		Log:   logging.Config{Level: "info", Format: "json"},
	}
}

func defaultNodeName() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return strings.ToLower(strings.TrimSpace(h))
}

// RegisterFlags adds the reporter's flags to fs, with c's values as defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	def := *c
	fs.StringVar(&c.NodeName, "node-name", def.NodeName, "name of this node (default: the host name, lower-cased)")
	fs.Func("hostname-override", "alias of --node-name (kubelet compatibility)", func(v string) error {
		c.NodeName = strings.ToLower(strings.TrimSpace(v))
		return nil
	})
	fs.StringVar(&c.NodeIP, "node-ip", def.NodeIP, "InternalIP to report; empty: the node name if it is an IP, else its DNS answer, else the default-route interface's address")
	fs.StringVar(&c.HostRoot, "host-root", def.HostRoot, "where the host's filesystem is mounted; /proc, /sys and /etc are read under it (use /host in a container with the host mounted there)")
	fs.IntVar(&c.MaxPods, "max-pods", def.MaxPods, "pods capacity of the node")
	c.KubeReserved, c.SystemReserved, c.NodeLabels = copyMap(def.KubeReserved), copyMap(def.SystemReserved), copyMap(def.NodeLabels)
	fs.Var(&c.KubeReserved, "kube-reserved", "resources reserved for node agents, e.g. cpu=100m,memory=256Mi,ephemeral-storage=1Gi")
	fs.Var(&c.SystemReserved, "system-reserved", "resources reserved for the operating system, same syntax as --kube-reserved")
	fs.StringVar(&c.EvictionHard, "eviction-hard", def.EvictionHard, "hard eviction thresholds (signal<quantity or signal<percent%); setting it replaces all defaults; signals: memory.available, nodefs.available, nodefs.inodesFree, imagefs.available, imagefs.inodesFree, pid.available")
	fs.DurationVar(&c.EvictionPressureTransitionPeriod, "eviction-pressure-transition-period", def.EvictionPressureTransitionPeriod, "keep a pressure condition True this long after its threshold was last crossed")
	fs.Var(&c.NodeLabels, "node-labels", "labels to register the node with, k=v,k2=v2 (applied at creation only)")
	c.RegisterWithTaints = append(flagenv.StringList(nil), def.RegisterWithTaints...)
	fs.Var(&c.RegisterWithTaints, "register-with-taints", "taints to register the node with, key[=value]:Effect,... (Effect: NoSchedule, PreferNoSchedule, NoExecute)")
	fs.BoolVar(&c.RegisterSchedulable, "register-schedulable", def.RegisterSchedulable, "register the node schedulable; false registers it cordoned (unschedulable:NoSchedule)")
	fs.StringVar(&c.Zone, "zone", def.Zone, "zone of the node, registered as the "+nodemodel.LabelZone+" label")
	fs.StringVar(&c.Region, "region", def.Region, "region of the node, registered as the "+nodemodel.LabelRegion+" label")
	fs.DurationVar(&c.StatusUpdateFrequency, "node-status-update-frequency", def.StatusUpdateFrequency, "how often the node status is computed (sent only when it changed or the report frequency elapsed)")
	fs.DurationVar(&c.StatusReportFrequency, "node-status-report-frequency", def.StatusReportFrequency, "how often an unchanged status is still sent (defaults to --node-status-update-frequency when only that is set)")
	fs.IntVar(&c.LeaseDurationSeconds, "node-lease-duration-seconds", def.LeaseDurationSeconds, "lease duration; the lease is renewed every quarter of it")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", def.ShutdownTimeout, "how long a stop may take (sending Leaving, closing the admin port)")
	fs.StringVar(&c.StaticPods, "static-pods", def.StaticPods, "directory of static pod manifests (JSON or YAML Pods, the kubelet's staticPodPath); each gets a mirror pod <name>-<node> in the API")
	fs.DurationVar(&c.PodReconcilePeriod, "pod-reconcile-period", def.PodReconcilePeriod, "write each pod bound to this node at most once per period (Ready=True after an outage, finished deletions, mirror pods)")
	c.ExternalAddresses = append(externalAddresses(nil), def.ExternalAddresses...)
	fs.Var(&c.ExternalAddresses, "external-address", "address the node is reachable at from outside, reported after InternalIP and Hostname: an IP becomes ExternalIP, a DNS name ExternalDNS; repeatable or comma-separated (flags add to the environment's list)")
	c.ContainerRuntimeEndpoints = append(flagenv.StringList(nil), def.ContainerRuntimeEndpoints...)
	fs.Var(&c.ContainerRuntimeEndpoints, "container-runtime-endpoint", "CRI sockets (unix:///path) asked for nodeInfo.containerRuntimeVersion (RuntimeService.Version), in order; empty: none. Mount them at the same path when the reporter runs in a container")
	fs.StringVar(&c.DockerEndpoint, "docker-endpoint", def.DockerEndpoint, "Docker Engine API socket asked (GET /version) when no CRI socket answers; empty: none. No runtime found: containerRuntimeVersion is empty")
	c.Collector.RegisterFlags(fs, "collector", def.Collector.Addresses, "collector addresses")
	c.Admin.RegisterFlags(fs, def.Admin.ListenAddress)
	c.Log.RegisterFlags(fs)
}

// externalAddresses is --external-address: repeatable, each value a
// comma-separated list, appended.
type externalAddresses []string

func (e *externalAddresses) String() string { return strings.Join(*e, ",") }

func (e *externalAddresses) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*e = append(*e, p)
		}
	}
	return nil
}

func copyMap(m flagenv.StringMap) flagenv.StringMap {
	out := flagenv.StringMap{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// parseTaint reads "key[=value]:Effect".
func parseTaint(s string) (*nodev1.Taint, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok {
		return nil, fmt.Errorf("taint %q: want key[=value]:Effect", s)
	}
	switch effect {
	case nodemodel.NoSchedule, nodemodel.PreferNoSchedule, nodemodel.NoExecute:
	default:
		return nil, fmt.Errorf("taint %q: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", s, effect)
	}
	key, value, _ := strings.Cut(kv, "=")
	if key == "" {
		return nil, fmt.Errorf("taint %q: empty key", s)
	}
	return &nodev1.Taint{Key: key, Value: value, Effect: effect}, nil
}

// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

// Package etcdtest runs a single-member embedded etcd for tests: the store
// layer's conformance suite, the in-process integration tests and the
// outage tests all use a real etcd, never a mock of it.
//
// Two ways to get a member:
//   - Start(t): a member owned by one test, closed in t.Cleanup. Use it when
//     the test stops, restarts or compacts the member.
//   - Shared(t): one member per test package, started on first use and
//     closed by Main, which the package's TestMain calls. Tests isolate
//     themselves by key prefix (NewStore gives each its own), so they can
//     run in parallel on one member; they must not Stop or Compact it.
//
// Both skip the test under -short: an etcd member costs a second or two of
// start-up and a data directory, which unit runs should not pay.
package etcdtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/nodepulse/nodepulse/services/nodestore/etcdstore"
)

// StartTimeout bounds how long a member may take to become ready. Generous:
// on two busy cores a start has been seen to take several seconds.
var StartTimeout = 60 * time.Second

// LogEnv names the environment variable that, set to a zap level ("error",
// "info", "debug"), sends the member's logs to stderr. Unset, they are
// discarded: etcd is chatty and its logs would drown test output.
const LogEnv = "NODEPULSE_ETCD_LOG"

// Cluster is one embedded etcd member and a client connected to it.
type Cluster struct {
	// Endpoints are the client URLs ("http://127.0.0.1:port"); they stay the
	// same across Stop and Restart.
	Endpoints []string
	// Client is connected to Endpoints. It survives Stop and Restart: calls
	// fail while the member is down and work again after Restart.
	Client *clientv3.Client

	dir        string
	clientPort int
	peerPort   int

	mu   sync.Mutex
	etcd *embed.Etcd // nil while stopped
}

// Start starts a member owned by t, closed when t ends.
func Start(t testing.TB) *Cluster {
	t.Helper()
	skipShort(t)
	c, err := start(t.TempDir())
	if err != nil {
		t.Fatalf("embedded etcd: %v", err)
	}
	t.Cleanup(c.close)
	return c
}

func skipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs an embedded etcd; skipped under -short")
	}
}

func start(dir string) (*Cluster, error) {
	c := &Cluster{dir: dir}
	var err error
	// A free port can be taken between choosing it and etcd binding it
	// (another test process does the same thing); choose again then.
	for attempt := 0; attempt < 5; attempt++ {
		if c.clientPort, c.peerPort, err = freePorts(); err != nil {
			return nil, err
		}
		if err = c.startMember(); err == nil || !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	c.Endpoints = []string{fmt.Sprintf("http://127.0.0.1:%d", c.clientPort)}
	c.Client, err = c.newClient()
	if err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// freePorts returns two ports that were free a moment ago. They come from
// below Linux's ephemeral range (32768 and up), so the kernel does not hand
// them to outgoing connections meanwhile, and they stay free across Stop and
// Restart.
func freePorts() (int, int, error) {
	var ports []int
	for tries := 0; len(ports) < 2 && tries < 200; tries++ {
		p := 20000 + rand.IntN(12000)
		if len(ports) == 1 && ports[0] == p {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		l.Close()
		ports = append(ports, p)
	}
	if len(ports) < 2 {
		return 0, 0, errors.New("no free loopback ports found")
	}
	return ports[0], ports[1], nil
}

func (c *Cluster) config() (*embed.Config, error) {
	cfg := embed.NewConfig()
	cfg.Name = "etcdtest"
	cfg.Dir = filepath.Join(c.dir, "member")
	cu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", c.clientPort)}
	pu := url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", c.peerPort)}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.InitialClusterToken = "etcdtest-" + strconv.Itoa(c.clientPort)
	// Test data need not survive a machine crash, only Stop/Restart (a
	// clean close), and fsync is the slowest part of every write here.
	cfg.UnsafeNoFsync = true
	lg, err := logger()
	if err != nil {
		return nil, err
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	return cfg, nil
}

func logger() (*zap.Logger, error) {
	level := os.Getenv(LogEnv)
	if level == "" {
		return zap.NewNop(), nil
	}
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: %w", LogEnv, level, err)
	}
	zc := zap.NewDevelopmentConfig()
	zc.Level = zap.NewAtomicLevelAt(lvl)
	return zc.Build()
}

// startMember starts the member on c's ports and data dir and waits until
// it serves.
func (c *Cluster) startMember() error {
	cfg, err := c.config()
	if err != nil {
		return err
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start etcd on ports %d/%d: %w", c.clientPort, c.peerPort, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("etcd failed while starting: %w", err)
	case <-time.After(StartTimeout):
		e.Server.Stop()
		e.Close()
		return fmt.Errorf("etcd not ready within %v", StartTimeout)
	}
	c.mu.Lock()
	c.etcd = e
	c.mu.Unlock()
	return nil
}

func (c *Cluster) newClient() (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   c.Endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{
			// gRPC's default reconnect backoff grows to 2 minutes; after a
			// Restart tests want the client back within about a second.
			grpc.WithConnectParams(grpc.ConnectParams{
				Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
				MinConnectTimeout: 5 * time.Second,
			}),
		},
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client for %v: %w", c.Endpoints, err)
	}
	return cli, nil
}

// NewClient returns another client of the member, closed when t ends: for
// code under test that must own its connection.
func (c *Cluster) NewClient(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := c.newClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// DBFile is the member's bbolt file (etcd's <data dir>/member/snap/db); read
// it only while the member is stopped.
func (c *Cluster) DBFile() string { return filepath.Join(c.dir, "member", "member", "snap", "db") }

// Stop closes the member, as an etcd outage would; data and ports are kept
// for Restart. Stopping a stopped member does nothing.
func (c *Cluster) Stop() {
	c.mu.Lock()
	e := c.etcd
	c.etcd = nil
	c.mu.Unlock()
	if e != nil {
		e.Close()
	}
}

// Restart starts a stopped member again on the same data and ports, and
// waits until it serves. The port is re-bound with retries: the closed
// listener's port may take a moment to be free again.
func (c *Cluster) Restart(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	running := c.etcd != nil
	c.mu.Unlock()
	if running {
		t.Fatal("etcdtest: Restart of a running member; call Stop first")
	}
	deadline := time.Now().Add(StartTimeout)
	for {
		err := c.startMember()
		if err == nil {
			return
		}
		if !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			t.Fatalf("restart etcd: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Running reports whether the member is started.
func (c *Cluster) Running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.etcd != nil
}

// Compact compacts the member's history up to rev, and waits until the
// compaction is physically done, so a watch started afterwards reliably sees
// it. Compaction is member-wide: never use it on a Shared member.
func (c *Cluster) Compact(t testing.TB, rev int64) {
	t.Helper()
	if err := c.CompactContext(t.Context(), rev); err != nil {
		t.Fatalf("compact at %d: %v", rev, err)
	}
}

// CompactContext is Compact returning the error, for helpers that must not
// fail the test themselves.
func (c *Cluster) CompactContext(ctx context.Context, rev int64) error {
	_, err := c.Client.Compact(ctx, rev, clientv3.WithCompactPhysical())
	return err
}

func (c *Cluster) close() {
	if c.Client != nil {
		c.Client.Close()
	}
	c.Stop()
}

var prefixSeq atomic.Int64

// Prefix returns a key prefix no other call returns, named after the test
// so that a look at the data shows who wrote it: "/t/<test name>-<n>/".
func (c *Cluster) Prefix(t testing.TB) string {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, t.Name())
	if len(name) > 100 {
		name = name[:100]
	}
	return fmt.Sprintf("/t/%s-%d/", name, prefixSeq.Add(1))
}

// NewStore returns an etcdstore on c's client under a fresh Prefix, so tests
// sharing one member never see each other's data. Closing the store leaves
// the shared client open.
func NewStore(t testing.TB, c *Cluster) *etcdstore.Store {
	return NewStoreWith(t, c, etcdstore.Config{})
}

// NewStoreWith is NewStore with settings (page size, request timeout); an
// empty cfg.Prefix gets a fresh one.
func NewStoreWith(t testing.TB, c *Cluster, cfg etcdstore.Config) *etcdstore.Store {
	if cfg.Prefix == "" {
		cfg.Prefix = c.Prefix(t)
	}
	cfg.Endpoints = c.Endpoints
	return etcdstore.Wrap(c.Client, cfg, zap.NewNop())
}

var shared struct {
	mu      sync.Mutex
	inMain  bool
	cluster *Cluster
	dir     string
	err     error
}

// Main runs a package's tests and then closes the Shared member, if one was
// started. Call it from TestMain:
//
//	func TestMain(m *testing.M) { etcdtest.Main(m) }
func Main(m *testing.M) {
	shared.mu.Lock()
	shared.inMain = true
	shared.mu.Unlock()
	code := m.Run()
	shared.mu.Lock()
	if shared.cluster != nil {
		shared.cluster.close()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	shared.mu.Unlock()
	os.Exit(code)
}

// Shared returns the package's shared member, starting it on first use. The
// package's TestMain must call Main, which closes it.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	skipShort(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.inMain {
		t.Fatal("etcdtest.Shared needs a TestMain that calls etcdtest.Main")
	}
	if shared.cluster == nil && shared.err == nil {
		shared.dir, shared.err = os.MkdirTemp("", "etcdtest-")
		if shared.err == nil {
			shared.cluster, shared.err = start(shared.dir)
		}
	}
	if shared.err != nil {
		t.Fatalf("shared embedded etcd: %v", shared.err)
	}
	return shared.cluster
}

// SPDX-License-Identifier: Apache-2.0
// Copyright The nodepulse Authors

package grpcclient

// The "nodepulse_prefer" balancer: round-robin over the backends that
// report SERVING, as grpc-go's round_robin, except that a call whose
// context names a preferred address (Prefer) goes to that backend when it
// is one of the connection's and ready. A collector that asks a reporter
// to move names the collector with the most room (docs/spec.md §20.3);
// the reporter already holds a connection to it (round-robin connects to
// every address), so following the hint costs no new connection. A hint
// the picker cannot follow (an address the reporter does not know, or a
// backend that is not ready) falls back to round-robin: it can delay
// nothing and pin nothing.

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/balancer/base"
)

// PreferBalancer is the name of the balancing policy Dial configures.
const PreferBalancer = "nodepulse_prefer"

func init() {
	balancer.Register(base.NewBalancerBuilder(PreferBalancer, preferPickerBuilder{}, base.Config{HealthCheck: true}))
}

// Preference is one call's preferred backend.
type Preference struct {
	addr     string
	followed atomic.Bool
}

// Followed says whether the call went to the preferred address.
func (p *Preference) Followed() bool { return p != nil && p.followed.Load() }

type preferKey struct{}

// Prefer returns ctx naming addr (host:port, as in the connection's
// address list or DNS answer) as the backend for the calls made with it;
// "" prefers nothing. The Preference says afterwards whether it was
// followed.
func Prefer(ctx context.Context, addr string) (context.Context, *Preference) {
	if addr == "" {
		return ctx, nil
	}
	p := &Preference{addr: addr}
	return context.WithValue(ctx, preferKey{}, p), p
}

type preferPickerBuilder struct{}

func (preferPickerBuilder) Build(info base.PickerBuildInfo) balancer.Picker {
	if len(info.ReadySCs) == 0 {
		return base.NewErrPicker(balancer.ErrNoSubConnAvailable)
	}
	p := &preferPicker{byAddr: make(map[string]balancer.SubConn, len(info.ReadySCs))}
	for sc, i := range info.ReadySCs {
		p.scs = append(p.scs, sc)
		p.byAddr[i.Address.Addr] = sc
	}
	// Start at a random backend, as round_robin does, so that clients
	// built at the same moment do not all begin with the first.
	p.next = uint32(rand.IntN(len(p.scs)))
	return p
}

type preferPicker struct {
	byAddr map[string]balancer.SubConn
	mu     sync.Mutex
	scs    []balancer.SubConn
	next   uint32
}

func (p *preferPicker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	if pref, _ := info.Ctx.Value(preferKey{}).(*Preference); pref != nil {
		if sc, ok := p.byAddr[pref.addr]; ok {
			pref.followed.Store(true)
			return balancer.PickResult{SubConn: sc}, nil
		}
	}
	p.mu.Lock()
	sc := p.scs[p.next%uint32(len(p.scs))]
	p.next++
	p.mu.Unlock()
	return balancer.PickResult{SubConn: sc}, nil
}

// PreferredAddress is the address Prefer put in ctx ("" for none): for
// dialers and tests that open streams some other way.
func PreferredAddress(ctx context.Context) string {
	if p, _ := ctx.Value(preferKey{}).(*Preference); p != nil {
		return p.addr
	}
	return ""
}

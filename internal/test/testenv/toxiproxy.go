package testenv

import (
	"context"
	"fmt"
	"strings"
	"sync"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// Toxic directions: upstream is what the client sends to the server,
// downstream what the server answers.
const (
	Upstream   = "upstream"
	Downstream = "downstream"
)

var quietToxiproxy sync.Once

// Proxy is a TCP proxy run by toxiproxy inside the test process, between
// a service and a server it depends on, whose link a test can slow,
// throttle, reset or black-hole.
type Proxy struct {
	p *toxiproxy.Proxy
	// Addr is the host:port to connect to instead of the upstream.
	Addr string
}

// StartProxy starts a proxy on a free loopback port to upstream
// (host:port), stopped when t ends.
func StartProxy(t T, name, upstream string) *Proxy {
	t.Helper()
	SkipShort(t, "a proxy to a data service")
	quietToxiproxy.Do(func() { zerolog.SetGlobalLevel(zerolog.ErrorLevel) })
	server := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(server, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("testenv: start proxy %s: %v", name, err)
	}
	t.Cleanup(p.Stop)
	return &Proxy{p: p, Addr: p.Listen}
}

// add adds a toxic of typ on direction with attributes given as JSON.
func (p *Proxy) add(name, typ, direction, attributes string) error {
	_, err := p.p.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
		`{"name": %q, "type": %q, "stream": %q, "toxicity": 1, "attributes": %s}`, name, typ, direction, attributes)))
	if err != nil {
		return fmt.Errorf("testenv: toxic %s on %s: %w", typ, p.p.Name, err)
	}
	return nil
}

// Latency delays the data sent in direction by ms milliseconds, give or
// take jitter.
func (p *Proxy) Latency(direction string, ms, jitter int) error {
	return p.add("latency_"+direction, "latency", direction, fmt.Sprintf(`{"latency": %d, "jitter": %d}`, ms, jitter))
}

// Bandwidth limits the data sent in direction to kbps kilobytes a second.
func (p *Proxy) Bandwidth(direction string, kbps int) error {
	return p.add("bandwidth_"+direction, "bandwidth", direction, fmt.Sprintf(`{"rate": %d}`, kbps))
}

// Reset resets every connection (TCP RST) as soon as data is sent in
// direction, after ms milliseconds: downstream, the server has the request
// but its answer is lost.
func (p *Proxy) Reset(direction string, ms int) error {
	return p.add("reset_"+direction, "reset_peer", direction, fmt.Sprintf(`{"timeout": %d}`, ms))
}

// HalfOpen black-holes direction: the connections stay open, and what is
// sent that way is dropped, never delivered.
func (p *Proxy) HalfOpen(direction string) error {
	return p.add("halfopen_"+direction, "timeout", direction, `{"timeout": 0}`)
}

// Heal removes every toxic; connections a toxic broke stay broken.
func (p *Proxy) Heal() {
	p.p.Toxics.ResetToxics(context.Background())
}

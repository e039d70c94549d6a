package fleet

import (
	"net/url"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// metrics are the fleet's Prometheus series (docs/replicas.md, "What to
// monitor").
type metrics struct {
	sent, received *prometheus.CounterVec
	dropped        *prometheus.CounterVec
	invalid        *prometheus.CounterVec
	publishErrors  prometheus.Counter
	reads, read    prometheus.Counter
	gaps, holds    prometheus.Counter
	transientIn    prometheus.Counter
	lateLocal      prometheus.Counter
	storeErrors    prometheus.Counter
	remote         prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer, f *Fleet) *metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "irisgate_fleet_" + name, Help: help})
	}
	m := &metrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "irisgate_fleet_messages_sent_total",
			Help: "Messages published to the fleet, by kind (c: a committed cursor, t: a transient frame, p: presence, q: query, b: bye)."}, []string{"kind"}),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "irisgate_fleet_messages_received_total",
			Help: "Valid messages received from other replicas, by kind."}, []string{"kind"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "irisgate_fleet_dropped_total",
			Help: "What the fleet gave up, by reason: transient frames (too_large, held_full, held_expired), cursors beyond the store's head (beyond_head), NATS's slow_consumer, a gap the store could not fill (gap_unread), messages not sent because NATS took none for a while (send_queue_full). Devices heal durable frames by sync."},
			[]string{"reason"}),
		invalid: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "irisgate_fleet_invalid_total",
			Help: "Messages refused, by reason: bad_tag (not signed with this fleet's key, or altered), stale (dated more than MaxSkew from this replica's clock), version (another wire version), too_large, malformed (out of bounds)."},
			[]string{"reason"}),
		publishErrors: counter("publish_errors_total", "Messages that could not be published (NATS away past its reconnect buffer)."),
		reads:         counter("store_reads_total", "Reads of the outbox for frames other replicas committed."),
		read:          counter("frames_read_total", "Durable frames of other replicas read from the store and delivered here."),
		gaps:          counter("gaps_filled_total", "Gaps in the cursors announced that were read from the store after the hold (a cursor message lost or late)."),
		holds:         counter("reorder_holds_total", "Transient frames held until the durable frame before them was delivered."),
		transientIn:   counter("transient_delivered_total", "Transient frames of other replicas delivered here."),
		lateLocal:     counter("late_local_total", "Frames of this replica delivered from the store before their publisher got to them (their request's answer went without its id)."),
		storeErrors:   counter("store_errors_total", "Failed reads of the store (retried)."),
		remote:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "irisgate_fleet_presence_devices", Help: "Devices other replicas say are connected to them."}),
	}
	if reg != nil {
		reg.MustRegister(m.sent, m.received, m.dropped, m.invalid, m.publishErrors, m.reads, m.read, m.gaps, m.holds,
			m.transientIn, m.lateLocal, m.storeErrors, m.remote,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "irisgate_fleet_nats_connected", Help: "1 while NATS is connected."},
				func() float64 {
					if nc := f.nc.Load(); nc != nil && nc.IsConnected() {
						return 1
					}
					return 0
				}),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "irisgate_fleet_peers", Help: "Other replicas heard from lately."},
				func() float64 {
					f.peers.mu.RLock()
					defer f.peers.mu.RUnlock()
					return float64(len(f.peers.by))
				}),
		)
	}
	return m
}

// redact drops the password from a NATS URL list for logs.
func redact(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		// A token is the user part: none of it is logged.
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			u.User = url.User("redacted")
			parts[i] = u.String()
		}
	}
	return strings.Join(parts, ",")
}

// Stats are the reads of other replicas' frames so far: how many reads of
// the store, how many frames they brought, and the gaps read after the
// hold (the bench reports them).
type Stats struct{ Reads, FramesRead, Gaps int64 }

// Stats returns the fleet's counts so far.
func (f *Fleet) Stats() Stats {
	get := func(c prometheus.Counter) int64 {
		var m dto.Metric
		if c.Write(&m) != nil {
			return 0
		}
		return int64(m.GetCounter().GetValue())
	}
	return Stats{Reads: get(f.met.reads), FramesRead: get(f.met.read), Gaps: get(f.met.gaps)}
}

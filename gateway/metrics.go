package gateway

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the gateway's Prometheus series.
type Metrics struct {
	Connections prometheus.Gauge
	FramesIn    *prometheus.CounterVec
	FramesOut   *prometheus.CounterVec
	OutboxHead  prometheus.Gauge
	TurnLatency prometheus.Histogram
	Turns       *prometheus.CounterVec
	// Pings counts WebSocket pings sent (keepalives and proofs of
	// delivery); Limited counts what a bound refused or cut, by bound.
	Pings   prometheus.Counter
	Limited *prometheus.CounterVec
	// Unreadable counts the outbox frames syncs skipped because their
	// rows do not decode.
	Unreadable prometheus.Counter
	// CommitBatch is the writes of each group-commit transaction: whether
	// the group commit groups. Pipelined counts the message.send of all
	// connections accepted and not yet answered (SendPipe), PipelineFull
	// the times a connection's read loop waited for room in its pipeline.
	CommitBatch  prometheus.Histogram
	Pipelined    prometheus.Gauge
	PipelineFull prometheus.Counter
	// LeasesHeld and Takeovers are a replica's lane leases (issue 18;
	// always 0 on a lone gateway).
	LeasesHeld prometheus.Gauge
	Takeovers  prometheus.Counter
}

// NewMetrics makes the series and registers them with reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Connections: prometheus.NewGauge(prometheus.GaugeOpts{Name: "irisgate_connections", Help: "Live device connections."}),
		FramesIn:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "irisgate_frames_in_total", Help: "Frames received, by dialect and type."}, []string{"dialect", "type"}),
		FramesOut:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "irisgate_frames_out_total", Help: "Frames written to sockets, by dialect."}, []string{"dialect"}),
		OutboxHead:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "irisgate_outbox_head", Help: "Newest outbox cursor."}),
		TurnLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "irisgate_turn_seconds", Help: "Wall-clock duration of agent turns.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 16)}),
		Turns:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "irisgate_turns_total", Help: "Agent turns, by outcome."}, []string{"outcome"}),
		Pings:       prometheus.NewCounter(prometheus.CounterOpts{Name: "irisgate_pings_total", Help: "WebSocket pings sent: keepalives and proofs of delivery."}),
		Limited:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "irisgate_limited_total", Help: "Requests and connections a resource bound refused or cut, by bound."}, []string{"bound"}),
		Unreadable: prometheus.NewCounter(prometheus.CounterOpts{Name: "irisgate_sync_unreadable_frames_total",
			Help: "Outbox frames a sync skipped because their rows do not decode (the device is told truncated)."}),
		CommitBatch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "irisgate_commit_batch_writes",
			Help: "Writes committed in one group-commit transaction.", Buckets: prometheus.ExponentialBuckets(1, 2, 10)}),
		Pipelined: prometheus.NewGauge(prometheus.GaugeOpts{Name: "irisgate_sends_pipelined",
			Help: "message.send accepted from connections' pipelines and not yet committed and answered."}),
		PipelineFull: prometheus.NewCounter(prometheus.CounterOpts{Name: "irisgate_send_pipeline_full_total",
			Help: "Times a connection's read loop waited because its pipeline of sends was full (backpressure)."}),
		LeasesHeld: prometheus.NewGauge(prometheus.GaugeOpts{Name: "irisgate_lane_leases_held",
			Help: "Lanes whose turns this replica runs now (it holds their leases)."}),
		Takeovers: prometheus.NewCounter(prometheus.CounterOpts{Name: "irisgate_lane_takeovers_total",
			Help: "Lanes this replica took over from a replica whose lease had expired (it died or lost the database)."}),
	}
	if reg != nil {
		reg.MustRegister(m.Connections, m.FramesIn, m.FramesOut, m.OutboxHead, m.TurnLatency, m.Turns, m.Pings, m.Limited, m.Unreadable, m.CommitBatch, m.Pipelined, m.PipelineFull,
			m.LeasesHeld, m.Takeovers)
	}
	return m
}

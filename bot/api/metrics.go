package api

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Run states of the agentos_runs gauge: runs this process has accepted
// and not yet finished.
const (
	StateQueued  = "queued"  // accepted, waiting for a free run slot
	StateRunning = "running" // executing
)

// Metrics are the server's Prometheus metrics, in a registry of their own
// (never the global one, so tests and several servers in one process do not
// collide).
type Metrics struct {
	reg        *prometheus.Registry
	deliveries *prometheus.CounterVec
	runs       *prometheus.GaugeVec
	outcomes   *prometheus.CounterVec
	approvals  prometheus.Histogram
	streams    prometheus.Gauge

	mu    sync.Mutex
	depth func() float64
	dead  func() float64
}

// NewMetrics returns the metrics with the Go runtime and process
// collectors registered next to agentos_*.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentos_webhook_deliveries_total",
			Help: "Webhook deliveries by GitHub event and outcome (accepted, duplicate, bad_signature, ...).",
		}, []string{"event", "outcome"}),
		runs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "agentos_runs",
			Help: "Runs this process has accepted and not yet finished, by state (queued, running).",
		}, []string{"state"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentos_run_outcomes_total",
			Help: "Runs that stopped in this process, by status (completed, failed, denied, paused, error).",
		}, []string{"status"}),
		approvals: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "agentos_approval_latency_seconds",
			Help: "Time from an approval request to its answer.",
			// Approvals wait for people: seconds to a day.
			Buckets: []float64{1, 5, 15, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 12 * 3600, 24 * 3600},
		}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "agentos_event_streams",
			Help: "Open Server-Sent Events streams.",
		}),
	}
	depth := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "agentos_queue_depth",
		Help: "Webhook deliveries waiting in the queue.",
	}, m.queueDepth)
	dead := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "agentos_queue_dead",
		Help: "Webhook deliveries in the dead-letter state (failed for good; GET /v1/deliveries?state=dead lists them).",
	}, m.deadLetters)
	m.reg.MustRegister(m.deliveries, m.runs, m.outcomes, m.approvals, m.streams, depth, dead,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Expose both live states from the start, so a dashboard sees 0
	// rather than no series.
	m.runs.WithLabelValues(StateQueued)
	m.runs.WithLabelValues(StateRunning)
	return m
}

// Delivery counts one webhook delivery (the webhook package's Observer).
func (m *Metrics) Delivery(event, outcome string) {
	m.deliveries.WithLabelValues(event, outcome).Inc()
}

// SetDeadLetters sets the function agentos_queue_dead reads at each
// scrape; nil reports 0.
func (m *Metrics) SetDeadLetters(f func() float64) {
	m.mu.Lock()
	m.dead = f
	m.mu.Unlock()
}

func (m *Metrics) deadLetters() float64 {
	m.mu.Lock()
	f := m.dead
	m.mu.Unlock()
	if f == nil {
		return 0
	}
	return f()
}

// SetQueueDepth sets the function agentos_queue_depth reads at each
// scrape; nil reports 0.
func (m *Metrics) SetQueueDepth(f func() float64) {
	m.mu.Lock()
	m.depth = f
	m.mu.Unlock()
}

func (m *Metrics) queueDepth() float64 {
	m.mu.Lock()
	f := m.depth
	m.mu.Unlock()
	if f == nil {
		return 0
	}
	return f()
}

// RunQueued counts a run accepted and waiting for a slot.
func (m *Metrics) RunQueued() { m.runs.WithLabelValues(StateQueued).Inc() }

// RunStarted moves a run from queued to running.
func (m *Metrics) RunStarted() {
	m.runs.WithLabelValues(StateQueued).Dec()
	m.runs.WithLabelValues(StateRunning).Inc()
}

// RunDropped removes a queued run that never started (shutdown).
func (m *Metrics) RunDropped() { m.runs.WithLabelValues(StateQueued).Dec() }

// RunFinished removes a running run and counts how it stopped.
func (m *Metrics) RunFinished(status string) {
	m.runs.WithLabelValues(StateRunning).Dec()
	m.outcomes.WithLabelValues(status).Inc()
}

// ApprovalAnswered observes the time an approval waited for its answer.
func (m *Metrics) ApprovalAnswered(waited time.Duration) {
	m.approvals.Observe(waited.Seconds())
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry returns the private registry, for more collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

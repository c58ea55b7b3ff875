package api

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/agentos/agentos/runtime/buildinfo"
	"github.com/agentos/agentos/runtime/provider"
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

	// From the event log (Store): every process's runs, by how they ended.
	terminal  *prometheus.CounterVec
	takeovers prometheus.Counter
	storeErrs *prometheus.CounterVec
	// Model calls (provider.Observed).
	modelCalls   *prometheus.CounterVec
	modelSeconds *prometheus.HistogramVec
	modelTokens  *prometheus.CounterVec
	// GitHub API calls (Transport).
	ghCalls     *prometheus.CounterVec
	ghRemaining *prometheus.GaugeVec

	depth, dead, oldest scrapeFunc

	// What the retention settings deleted (agentos serve's retention).
	retention *prometheus.CounterVec
}

// scrapeFunc is a gauge's value source, set after the metrics are built
// (the queue exists later) and read at each scrape; unset reads 0.
type scrapeFunc struct {
	p atomic.Pointer[func() float64]
}

func (s *scrapeFunc) set(f func() float64) {
	if f == nil {
		s.p.Store(nil)
		return
	}
	s.p.Store(&f)
}

func (s *scrapeFunc) read() float64 {
	if f := s.p.Load(); f != nil {
		return (*f)()
	}
	return 0
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
	}, m.depth.read)
	dead := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "agentos_queue_dead",
		Help: "Webhook deliveries in the dead-letter state (failed for good; GET /v1/deliveries?state=dead lists them).",
	}, m.dead.read)
	oldest := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "agentos_queue_oldest_claim_age_seconds",
		Help: "Age of the oldest webhook delivery claimed by a worker and not yet finished (0 when none): a stuck worker shows here first.",
	}, m.oldest.read)
	m.terminal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentos_run_terminal_reports_total",
		Help: "Terminal reports appended to the event log, by status and error class (class is empty for completed runs).",
	}, []string{"status", "class"})
	m.takeovers = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "agentos_run_takeovers_total",
		Help: "Runs taken over after the process working them stopped (run.resumed events of a takeover).",
	})
	m.storeErrs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentos_store_errors_total",
		Help: "Event store operations that failed, by operation (append, read, scan, list, sessions) and kind (conflict, schema, error).",
	}, []string{"op", "kind"})
	m.modelCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentos_model_requests_total",
		Help: "Model completions (after the adapter's retries), by provider, model and outcome (ok, error, rate_limited, cancelled, invalid).",
	}, []string{"provider", "model", "outcome"})
	m.modelSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agentos_model_request_duration_seconds",
		Help:    "Time a model completion took, retries included, by provider.",
		Buckets: []float64{0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300},
	}, []string{"provider"})
	m.modelTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentos_model_tokens_total",
		Help: "Tokens the models used, by provider, model and kind (input, output, cached_input).",
	}, []string{"provider", "model", "kind"})
	m.ghCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentos_github_requests_total",
		Help: "GitHub API requests, by method and status class (2xx, 3xx, 4xx, 5xx, rate_limited, error for no answer).",
	}, []string{"method", "status"})
	m.ghRemaining = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "agentos_github_rate_limit_remaining",
		Help: "Requests left in GitHub's rate-limit window (X-RateLimit-Remaining of the last answer), by resource (core, graphql, search, ...).",
	}, []string{"resource"})
	m.retention = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentos_retention_deleted_total",
		Help: "What the retention settings deleted, by kind (sessions, events, deliveries).",
	}, []string{"kind"})
	for _, k := range []string{"sessions", "events", "deliveries"} {
		m.retention.WithLabelValues(k)
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "agentos_build_info",
		Help: "Always 1; the labels name the running build.",
	}, []string{"version", "goversion"})
	build.WithLabelValues(buildinfo.Version(), runtime.Version()).Set(1)
	m.reg.MustRegister(m.deliveries, m.runs, m.outcomes, m.approvals, m.streams, depth, dead, oldest,
		m.terminal, m.takeovers, m.storeErrs, m.modelCalls, m.modelSeconds, m.modelTokens, m.ghCalls, m.ghRemaining, build, m.retention,
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
func (m *Metrics) SetDeadLetters(f func() float64) { m.dead.set(f) }

// SetQueueDepth sets the function agentos_queue_depth reads at each
// scrape; nil reports 0.
func (m *Metrics) SetQueueDepth(f func() float64) { m.depth.set(f) }

// RetentionDeleted counts n things of kind (sessions, events, deliveries)
// the retention settings deleted.
func (m *Metrics) RetentionDeleted(kind string, n int64) {
	m.retention.WithLabelValues(kind).Add(float64(n))
}

// SetOldestClaim sets the function agentos_queue_oldest_claim_age_seconds
// reads at each scrape; nil reports 0.
func (m *Metrics) SetOldestClaim(f func() float64) { m.oldest.set(f) }

// ModelCall counts one model completion (provider.ModelObserver): wrap
// the run's provider in provider.Observed{P: p, O: metrics}.
func (m *Metrics) ModelCall(prov, model string, took time.Duration, u provider.Usage, err error) {
	m.modelCalls.WithLabelValues(prov, model, modelOutcome(err)).Inc()
	m.modelSeconds.WithLabelValues(prov).Observe(took.Seconds())
	for kind, n := range map[string]int64{"input": u.InputTokens, "output": u.OutputTokens, "cached_input": u.CachedInputTokens} {
		if n > 0 {
			m.modelTokens.WithLabelValues(prov, model, kind).Add(float64(n))
		}
	}
}

// modelOutcome classifies a completion's error into a few values.
func modelOutcome(err error) string {
	var pe *provider.Error
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "cancelled"
	case errors.As(err, &pe) && pe.Status == http.StatusTooManyRequests:
		return "rate_limited"
	case errors.As(err, &pe) && pe.Code != provider.CodeProviderError:
		return "invalid" // SCHEMA_VIOLATION: a request or answer out of contract
	}
	return "error"
}

// var _ keeps Metrics a provider.ModelObserver.
var _ provider.ModelObserver = (*Metrics)(nil)

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

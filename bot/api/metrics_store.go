package api

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/agentos/agentos/runtime/event"
	agentrun "github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/store"
)

// Store returns s with its failures counted in agentos_store_errors_total
// and what it appends read for the run metrics: each turn.terminal counts
// in agentos_run_terminal_reports_total by status and error class (a
// failed run is logged at ERROR, a denied one at WARN, with its class),
// each takeover in agentos_run_takeovers_total. Reading the log rather
// than hooking the run manager counts every writer of this store alike:
// the bot, the API's resume, a takeover after a crash.
func (m *Metrics) Store(s store.Store, log *slog.Logger) store.Store {
	if log == nil {
		log = slog.Default()
	}
	return &meteredStore{Store: s, m: m, log: log}
}

type meteredStore struct {
	store.Store
	m   *Metrics
	log *slog.Logger
}

func (s *meteredStore) fail(ctx context.Context, op string, err error) {
	var conflict *store.ConflictError
	var schema *event.SchemaViolationError
	switch {
	case err == nil, ctx.Err() != nil:
		return // a caller that gave up is not a store failure
	case errors.As(err, &conflict):
		s.m.storeErrs.WithLabelValues(op, "conflict").Inc()
	case errors.As(err, &schema):
		s.m.storeErrs.WithLabelValues(op, "schema").Inc()
	default:
		s.m.storeErrs.WithLabelValues(op, "error").Inc()
	}
}

func (s *meteredStore) Append(ctx context.Context, sessionID string, expectedSeq int64, drafts ...event.Draft) ([]event.Event, error) {
	evs, err := s.Store.Append(ctx, sessionID, expectedSeq, drafts...)
	s.fail(ctx, "append", err)
	if err == nil {
		for i := range evs {
			s.observe(&evs[i])
		}
	}
	return evs, err
}

func (s *meteredStore) observe(e *event.Event) {
	switch e.Type {
	case event.TurnTerminal:
		var r agentrun.Report
		if e.DecodePayload(&r) != nil {
			return
		}
		status, class := boundStatus(r.Status), boundClass(r.ErrorClass)
		s.m.terminal.WithLabelValues(status, class).Inc()
		switch r.Status {
		case agentrun.StatusFailed:
			s.log.Error("run failed", "session_id", e.SessionID, "run_id", e.RunID, "class", class, "reason", r.Reason)
		case agentrun.StatusDenied:
			s.log.Warn("run denied", "session_id", e.SessionID, "run_id", e.RunID, "class", class, "reason", r.Reason)
		}
	case event.RunResumed:
		var p struct {
			Reason string `json:"reason"`
		}
		// Every takeover's reason starts so (run.Manager.Takeover and its
		// callers); a resume after an approval's answer does not.
		if e.DecodePayload(&p) == nil && strings.HasPrefix(p.Reason, "taken over") {
			s.m.takeovers.Inc()
		}
	}
}

// boundStatus and boundClass keep the labels to the values the runtime
// writes: the log is data, and a label per odd value would grow forever.
func boundStatus(s agentrun.Status) string {
	switch s {
	case agentrun.StatusCompleted, agentrun.StatusFailed, agentrun.StatusDenied, agentrun.StatusCancelled, agentrun.StatusPaused:
		return string(s)
	}
	return "other"
}

func boundClass(c agentrun.ErrorClass) string {
	switch c {
	case "", agentrun.ClassInvalidInput, agentrun.ClassPolicyDenied, agentrun.ClassToolRuntimeError, agentrun.ClassTimeout,
		agentrun.ClassAuthError, agentrun.ClassProviderError, agentrun.ClassReportMissing:
		return string(c)
	}
	return "other"
}

func (s *meteredStore) Read(ctx context.Context, sessionID string, fromSeq int64) ([]event.Event, error) {
	evs, err := s.Store.Read(ctx, sessionID, fromSeq)
	s.fail(ctx, "read", err)
	return evs, err
}

func (s *meteredStore) Scan(ctx context.Context, sessionID string, fromSeq int64, fn func(*event.Event) error) error {
	// An error fn returns is the caller's, not the store's.
	var fnErr error
	err := s.Store.Scan(ctx, sessionID, fromSeq, func(e *event.Event) error {
		fnErr = fn(e)
		return fnErr
	})
	if err != nil && (fnErr == nil || !errors.Is(err, fnErr)) {
		s.fail(ctx, "scan", err)
	}
	return err
}

func (s *meteredStore) Sessions(ctx context.Context) ([]store.SessionInfo, error) {
	ss, err := s.Store.Sessions(ctx)
	s.fail(ctx, "sessions", err)
	return ss, err
}

func (s *meteredStore) List(ctx context.Context, o store.ListOptions) ([]store.SessionInfo, error) {
	ss, err := s.Store.List(ctx, o)
	s.fail(ctx, "list", err)
	return ss, err
}

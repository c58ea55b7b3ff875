package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	agentrun "github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/store"
)

// takeOverInPlace continues session sid's run runID that a stopped
// process left running, in the worktree at root that the run changed in
// place (the repository itself: `agentos resume` and the API's runs work
// so): the worktree loses what the run's interrupted tool calls did to it
// (run.UndoInterrupted), and the runtime's Takeover closes those calls as
// interrupted (re-running the read-only ones) and goes on from the log
// (ADR 26). A worktree the log cannot account for ends the run with its
// report_missing terminal report, saying why; closed reports that case.
// evs are the session's events read while no process runs it. note
// receives what a person should be told.
func takeOverInPlace(ctx context.Context, mgr *agentrun.Manager, eng *agentrun.Engine, root, sid string, evs []event.Event, runID, reason string, note func(string)) (out agentrun.Outcome, closed bool, err error) {
	n, err := agentrun.UndoInterrupted(root, evs, runID)
	var nr *agentrun.NotRebuildableError
	if errors.As(err, &nr) {
		note(fmt.Sprintf("session %s: the run cannot continue: %v", sid, err))
		out, err := mgr.CloseOrphanReason(ctx, sid, nr.Error())
		return out, true, err
	}
	if err != nil {
		return agentrun.Outcome{}, false, err
	}
	if n > 0 {
		note(fmt.Sprintf("session %s: undid the interrupted change to %d file(s)", sid, n))
	}
	note(fmt.Sprintf("session %s: taking over run %s, whose process stopped", sid, runID))
	out, err = mgr.Takeover(ctx, eng, sid, root, "", reason)
	return out, false, err
}

// apiTakeoverEvery is how often `agentos serve` looks for runs started
// through the API that no process runs (besides once at start). A run
// handed back by a store outage in this process, or left by a replica
// that died, waits at most this long plus (PostgreSQL) its lease's TTL.
const apiTakeoverEvery = 30 * time.Second

// apiTakeoverPage is the page size of the sweep's session listing.
const apiTakeoverPage = 200

// apiTakeoverReason is the reason run.resumed records. Every takeover's
// reason starts with "taken over" (the takeover metric counts them so).
const apiTakeoverReason = "taken over by agentos serve: the process running this API run stopped (SIGTERM, SIGKILL or a store outage)"

// apiTakeover takes over the runs started through the HTTP API (`POST
// /v1/runs`, trigger source "api") that no process runs: a webhook's run
// is taken over when its delivery is retried, an API run has no delivery
// to retry it. See docs/graceful-stop.md, "Runs started through the API".
type apiTakeover struct {
	r     *serveRuns
	every time.Duration
	limit int // takeovers in flight at most (the API's max_runs)
	drain time.Duration
	log   *slog.Logger
	began time.Time // the process's start, for the logged delay

	mu       sync.Mutex
	inflight int
	// quiet are sessions found not to need a takeover (not running in
	// their log, or not an API run), by the last seq they were read at:
	// unchanged, they are not read again.
	quiet map[string]int64
}

func newAPITakeover(r *serveRuns, limit int, drain time.Duration, log *slog.Logger) *apiTakeover {
	if limit < 1 {
		limit = 1
	}
	return &apiTakeover{r: r, every: apiTakeoverEvery, limit: limit, drain: drain, log: log, began: time.Now(), quiet: map[string]int64{}}
}

// run sweeps at once and then every a.every until stopping ends (the
// graceful stop: no new takeover begins), and returns once the takeovers
// it began have returned. A takeover in progress then stops at its next
// step (the Manager's Stop) or, after the drain time, is cut like the
// API's runs; either way it records run.interrupted and is left for the
// next process.
func (a *apiTakeover) run(stopping, actx context.Context) error {
	runCtx, cut := context.WithCancelCause(context.WithoutCancel(actx))
	defer cut(nil)
	var wg sync.WaitGroup
	defer wg.Wait()
	go func() {
		select {
		case <-runCtx.Done():
			return
		case <-stopping.Done():
		}
		t := time.NewTimer(a.drain)
		defer t.Stop()
		select {
		case <-runCtx.Done():
		case <-t.C:
			cut(drainCut(a.drain))
		}
	}()
	tick := time.NewTicker(a.every)
	defer tick.Stop()
	for {
		if err := a.sweep(stopping, runCtx, &wg); err != nil && stopping.Err() == nil {
			a.log.Warn("looking for API runs to take over failed; trying again later", "error", err, "every", a.every)
		}
		select {
		case <-stopping.Done():
			return nil
		case <-actx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// sweep pages through the store's session index (keyset listing, one
// page in memory at a time) and begins a takeover, in a goroutine of its
// own, of each API session whose run is orphaned. Ended sessions are
// skipped from the index entry alone; others are read unless they were
// found quiet at the same last seq.
func (a *apiTakeover) sweep(stopping, runCtx context.Context, wg *sync.WaitGroup) error {
	var after store.Cursor
	seen := map[string]bool{}
	for {
		if stopping.Err() != nil {
			return nil
		}
		page, err := a.r.store.List(stopping, store.ListOptions{Limit: apiTakeoverPage, After: after})
		if err != nil {
			return err
		}
		for _, in := range page {
			if in.LastType == event.SessionClose {
				continue
			}
			seen[in.SessionID] = true
			if a.full() {
				return nil // the rest waits for the next sweep
			}
			a.mu.Lock()
			q, ok := a.quiet[in.SessionID]
			a.mu.Unlock()
			if ok && q == in.LastSeq {
				continue
			}
			if err := a.consider(stopping, runCtx, in, wg); err != nil {
				a.log.Warn("API run takeover failed; trying again at the next sweep", "session", in.SessionID, "error", err)
			}
		}
		if len(page) < apiTakeoverPage {
			break
		}
		after = store.CursorOf(page[len(page)-1])
	}
	a.mu.Lock()
	for sid := range a.quiet {
		if !seen[sid] {
			delete(a.quiet, sid) // ended or deleted since
		}
	}
	a.mu.Unlock()
	return nil
}

func (a *apiTakeover) full() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.inflight >= a.limit
}

// orphan is what a session's log says of a run to take over.
type orphan struct {
	runID, repo string
	evs         []event.Event
}

// inspect reads session sid and returns its run to take over, or nil
// when its last run is not running or was not started through the API.
func (a *apiTakeover) inspect(ctx context.Context, sid string) (*orphan, error) {
	evs, err := a.r.store.Read(ctx, sid, 1)
	if err != nil {
		return nil, err
	}
	snap, err := replay.Replay(evs)
	if err != nil {
		return nil, fmt.Errorf("replay %s: %w", sid, err)
	}
	if snap.RunStatus != replay.RunRunning || snap.RunID == "" {
		return nil, nil
	}
	for i := len(evs) - 1; i >= 0; i-- {
		e := evs[i]
		if e.Type != event.RunStarted || event.FieldString(e.Payload, "run_id") != snap.RunID {
			continue
		}
		trig := event.Field(e.Payload, "trigger")
		if event.FieldString(trig, "source") != "api" {
			return nil, nil
		}
		return &orphan{runID: snap.RunID, repo: event.FieldString(trig, "repo_dir"), evs: evs}, nil
	}
	return nil, nil
}

// consider decides on one session and begins its takeover when it is an
// orphaned API run: this process does not run it (nor is about to: the
// API's Execute marks it first), and with replicas its session lease is
// free (another replica holding it is alive and runs it).
func (a *apiTakeover) consider(stopping, runCtx context.Context, in store.SessionInfo, wg *sync.WaitGroup) error {
	sid := in.SessionID
	if a.r.mgr.Running(sid) {
		return nil
	}
	o, err := a.inspect(stopping, sid)
	if err != nil {
		return err
	}
	if o == nil {
		a.mu.Lock()
		a.quiet[sid] = in.LastSeq
		a.mu.Unlock()
		return nil
	}
	done, ok := a.r.claimTakeover(sid)
	if !ok {
		return nil // this process runs it or is starting it
	}
	release, err := a.r.lease(stopping, sid)
	if errors.Is(err, webhook.ErrBusy) {
		done()
		return nil // another replica holds it: alive
	}
	if err != nil {
		done()
		return err
	}
	// Under the lease (or this process's claim), read again: the log may
	// have moved since the listing (the run ended, another replica took
	// it over and let go).
	if o, err = a.inspect(stopping, sid); err != nil || o == nil || a.r.mgr.Running(sid) {
		release()
		done()
		return err
	}
	a.mu.Lock()
	a.inflight++
	a.mu.Unlock()
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() {
			a.mu.Lock()
			a.inflight--
			a.mu.Unlock()
		}()
		defer done()
		defer release()
		a.takeOver(runCtx, sid, o)
	}()
	return nil
}

// takeOver takes session sid's orphaned run over in its recorded
// repository, or closes it with its report_missing terminal report when
// the repository is gone, no longer allowed, or cannot be made to match
// the log; then it exports the session's log as the API's runs do.
func (a *apiTakeover) takeOver(ctx context.Context, sid string, o *orphan) {
	log := a.log.With("session", sid, "run", o.runID)
	out, closed, err := a.continueRun(ctx, sid, o, log)
	if err != nil {
		if errors.Is(err, agentrun.ErrNotRunning) {
			return // ended or taken over meanwhile
		}
		log.Warn("API run takeover stopped with an error; it is tried again at the next sweep", "error", err)
		return
	}
	if closed {
		log.Info("API run closed: it cannot be taken over", "status", out.Status)
	} else {
		log.Info("API run taken over", "status", out.Status)
	}
	if _, err := exportSession(ctx, a.r.store, a.r.dataDir, sid); err != nil {
		log.Warn("export session log", "error", err)
	}
}

func (a *apiTakeover) continueRun(ctx context.Context, sid string, o *orphan, log *slog.Logger) (agentrun.Outcome, bool, error) {
	closeWhy := func(why string) (agentrun.Outcome, bool, error) {
		log.Info("API run taken over to close it", "reason", why, "since_start", time.Since(a.began).Round(time.Millisecond))
		out, err := a.r.mgr.CloseOrphanReason(ctx, sid, why)
		return out, true, err
	}
	if o.repo == "" {
		return closeWhy("the run records no repository directory (repo_dir), so no process can continue it")
	}
	if fi, err := os.Stat(o.repo); err != nil || !fi.IsDir() {
		why := fmt.Sprintf("its repository directory %s is gone", o.repo)
		if err == nil {
			why = fmt.Sprintf("its repository directory %s is not a directory", o.repo)
		} else if !errors.Is(err, os.ErrNotExist) {
			why = fmt.Sprintf("its repository directory %s cannot be opened: %v", o.repo, err)
		}
		return closeWhy(why)
	}
	root, err := a.r.allowed(o.repo)
	if err != nil {
		return closeWhy(fmt.Sprintf("its repository directory is no longer allowed: %v", err))
	}
	env, err := a.r.build(ctx, root, sid)
	if err != nil {
		return agentrun.Outcome{}, false, fmt.Errorf("assemble the runtime in %s: %w", root, err)
	}
	defer env.Close()
	log.Info("taking over an API run no process runs", "reason", apiTakeoverReason, "repo_dir", root, "since_start", time.Since(a.began).Round(time.Millisecond))
	return takeOverInPlace(ctx, a.r.mgr, env.Engine, env.Workspace.Root(), sid, o.evs, o.runID, apiTakeoverReason, func(s string) { log.Info(s) })
}

// apiWork tracks the sessions this process's API runs work and the ones
// it is taking over, so that the takeover never touches a run this
// process is starting or running (between Start's run.started and the
// Manager registering the run, Manager.Running is still false).
type apiWork struct {
	mu      sync.Mutex
	running map[string]int           // by the API's Execute (waiting or working)
	taking  map[string]chan struct{} // by the takeover; closed when it ends
}

// begin marks session sid as worked by an API run until the returned
// func is called. While this process takes the session's run over, it
// waits for the takeover to end (the run paused or finished), as a second
// run of one session waits for the first in this process; an answer to
// the approval the taken-over run paused at is resumed then.
func (w *apiWork) begin(ctx context.Context, sid string) (func(), error) {
	w.mu.Lock()
	if w.running == nil {
		w.running = map[string]int{}
	}
	w.running[sid]++ // from now on no takeover of sid begins
	taking := w.taking[sid]
	w.mu.Unlock()
	var once sync.Once
	end := func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.running[sid]--; w.running[sid] <= 0 {
				delete(w.running, sid)
			}
		})
	}
	if taking != nil {
		select {
		case <-taking:
		case <-ctx.Done():
			end()
			return nil, fmt.Errorf("session %s: waiting for this server's takeover of its run: %w", sid, context.Cause(ctx))
		}
	}
	return end, nil
}

// claimTakeover marks session sid as being taken over, unless an API run
// of this process works it or waits to, or another takeover has it.
func (w *apiWork) claimTakeover(sid string) (func(), bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running[sid] > 0 || w.taking[sid] != nil {
		return nil, false
	}
	if w.taking == nil {
		w.taking = map[string]chan struct{}{}
	}
	ch := make(chan struct{})
	w.taking[sid] = ch
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.taking, sid)
		close(ch)
	}, true
}

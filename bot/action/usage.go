package action

import (
	"context"
	"errors"
	"sync"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/replay"
	"github.com/agentos/agentos/runtime/store"
)

// The usage outputs (input_tokens, output_tokens, cost_usd) are what this
// job spent. A job that continues a session (an approval's resume, or a
// re-run attempt that finds the session an earlier attempt began) starts
// from the session's log on the artifact branch; what that log already
// held was spent by earlier jobs. So the job remembers, per session, the
// last event it found when it started (imported from the artifact branch,
// or already in its store) and reports the session's usage at the end
// minus its usage at that event.

// jobStore is the run's store, watching which events the job found rather
// than wrote: every import (the artifact log, verified by the dispatcher)
// and the sessions the store held when the job began.
type jobStore struct {
	store.Store
	mu    sync.Mutex
	found map[string]int64 // session → the last seq the job did not write
}

func newJobStore(ctx context.Context, st store.Store) (*jobStore, error) {
	js := &jobStore{Store: st, found: map[string]int64{}}
	// A fresh runner's store is empty; a reused RUNNER_TEMP is not.
	infos, err := st.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	for _, s := range infos {
		js.found[s.SessionID] = s.LastSeq
	}
	return js, nil
}

// ImportSealed implements store.Importer for the dispatcher's recovery
// path (run.ImportLog), and records the imported log's last seq.
func (js *jobStore) ImportSealed(ctx context.Context, sid string, evs []event.Event) error {
	imp, ok := js.Store.(store.Importer)
	if !ok {
		return errors.New("import: the store cannot import sealed events")
	}
	if err := imp.ImportSealed(ctx, sid, evs); err != nil {
		return err
	}
	if n := len(evs); n > 0 {
		js.mu.Lock()
		if last := evs[n-1].Seq; last > js.found[sid] {
			js.found[sid] = last
		}
		js.mu.Unlock()
	}
	return nil
}

// foundSeq is the last event of sid the job found rather than wrote (0:
// the job began the session).
func (js *jobStore) foundSeq(sid string) int64 {
	js.mu.Lock()
	defer js.mu.Unlock()
	return js.found[sid]
}

// jobUsage is what the job spent on session sid, from its log: the
// session's usage after its last event minus its usage after the last
// event the job found (usageUpTo); readErr is the error reading evs. ok
// is false when the job found none of
// the session (the dispatcher's own figure is then this job's).
func jobUsage(evs []event.Event, found int64, readErr error) (spent replay.Usage, ok bool, err error) {
	if found > 0 && readErr != nil {
		return replay.Usage{}, false, readErr
	}
	if found <= 0 || len(evs) == 0 {
		return replay.Usage{}, false, nil
	}
	end, err := replay.Replay(evs)
	if err != nil {
		return replay.Usage{}, false, err
	}
	before, err := usageUpTo(evs, found)
	if err != nil {
		return replay.Usage{}, false, err
	}
	return minus(end.Usage, before), true, nil
}

// usageUpTo is the session's usage after event seq last.
func usageUpTo(evs []event.Event, last int64) (replay.Usage, error) {
	n := 0
	for n < len(evs) && evs[n].Seq <= last {
		n++
	}
	if n == 0 {
		return replay.Usage{}, nil
	}
	snap, err := replay.Replay(evs[:n])
	if err != nil {
		return replay.Usage{}, err
	}
	return snap.Usage, nil
}

func minus(a, b replay.Usage) replay.Usage {
	return replay.Usage{
		InputTokens:       a.InputTokens - b.InputTokens,
		OutputTokens:      a.OutputTokens - b.OutputTokens,
		CachedInputTokens: a.CachedInputTokens - b.CachedInputTokens,
		CacheWriteTokens:  a.CacheWriteTokens - b.CacheWriteTokens,
		CostUSD:           a.CostUSD - b.CostUSD,
		UnpricedCalls:     a.UnpricedCalls - b.UnpricedCalls,
	}
}

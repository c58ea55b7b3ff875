package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/agentos/agentos/bot/dispatch"
	ghclient "github.com/agentos/agentos/bot/github"
	"github.com/agentos/agentos/bot/queue"
	"github.com/agentos/agentos/bot/webhook"
	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/runtime/provider"
	agentrun "github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/setup"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/store/postgres"
)

// engines builds run engines on session worktrees over the shared store;
// their commands run in sb (nil: detected from AGENTOS_SANDBOX). note
// receives what the operator should know about a worktree's
// configuration (a skipped hook, a matcher that selects no tool): the
// server logs it, the Action makes it a workflow warning.
func engines(st store.Store, policyFile string, prof provider.Profile, sb *sandbox.Sandbox, note func(sessionID, note string)) dispatch.Engines {
	return meteredEngines(st, policyFile, prof, sb, nil, nil, note)
}

// meteredEngines is engines with each run's Go build cache chosen by
// caches (by repository and trust, buildcache.go; nil: sb's own) and every
// model call reported to models (nil: not reported).
func meteredEngines(st store.Store, policyFile string, prof provider.Profile, sb *sandbox.Sandbox, caches *buildCaches, models provider.ModelObserver, note func(sessionID, note string)) dispatch.Engines {
	registry := observed(providers(nil), models)
	return func(ctx context.Context, r dispatch.EngineRequest) (*agentrun.Engine, func(), error) {
		rsb, done, err := caches.acquire(sb, r)
		if err != nil {
			return nil, nil, err
		}
		// Every event the run appends renews the claim of the delivery it
		// works for (queue.BeatOnAppend): a stuck run lets it expire.
		env, err := setup.Build(ctx, setup.Options{Dir: r.Dir, Runs: r.Runs, RequireWorkflows: true, PolicyFile: policyFile, Profile: prof, Providers: registry, SessionID: r.SessionID, Store: queue.BeatOnAppend(st), UntrustedRepo: r.Untrusted, Sandbox: rsb})
		if err != nil {
			done()
			return nil, nil, err
		}
		if note != nil {
			for _, n := range env.Notes {
				note(r.SessionID, n)
			}
		}
		return env.Engine, func() { env.Close(); done() }, nil
	}
}

// webhookSpoolFile is the delivery spool in the data directory: where
// deliveries wait while the queue's store is down (queue.Spool).
const webhookSpoolFile = "webhooks.spool"

// spooled puts the spool of dataDir in front of q, so that intake answers
// 202 while q's store is down.
func spooled(q queue.Durable, dataDir string, log *slog.Logger) (serveQueue, error) {
	s, err := queue.OpenSpool(filepath.Join(dataDir, webhookSpoolFile), q, queue.SpoolOptions{Logger: log})
	if err != nil {
		return nil, fmt.Errorf("serve: %w", errors.Join(err, q.Close()))
	}
	return s, nil
}

// reconciler is the actor that asks GitHub to redeliver the webhooks the
// bot did not take (webhook.Reconciler), for a bot that is a GitHub App
// (the delivery log is the App's); nil otherwise. With leases (replicas
// on PostgreSQL) one replica at a time reconciles: the holder of the
// reconciler's lease.
func reconciler(gh *ghclient.Client, q serveQueue, leases *postgres.Leases, log *slog.Logger) func(context.Context) error {
	if gh == nil || !gh.IsApp() {
		return nil
	}
	r := &webhook.Reconciler{Hooks: gh.GitHub().Apps, Events: dispatch.Events(), Logger: log,
		Known: func(ctx context.Context, guid string) (bool, error) {
			_, ok, err := q.Get(ctx, guid)
			return ok, err
		}}
	if leases != nil {
		r.Lease = leases
	}
	return r.Run
}

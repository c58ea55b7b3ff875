package main

import (
	"context"

	"github.com/agentos/agentos/bot/dispatch"
	"github.com/agentos/agentos/kernel/sandbox"
	"github.com/agentos/agentos/runtime/provider"
	agentrun "github.com/agentos/agentos/runtime/run"
	"github.com/agentos/agentos/runtime/setup"
	"github.com/agentos/agentos/runtime/store"
)

// engines builds run engines on session worktrees over the shared store;
// their commands run in sb (nil: detected from AGENTOS_SANDBOX). note
// receives what the operator should know about a worktree's
// configuration (a skipped hook, a matcher that selects no tool): the
// server logs it, the Action makes it a workflow warning.
func engines(st store.Store, policyFile string, prof provider.Profile, sb *sandbox.Sandbox, note func(sessionID, note string)) dispatch.Engines {
	return func(ctx context.Context, r dispatch.EngineRequest) (*agentrun.Engine, func(), error) {
		env, err := setup.Build(ctx, setup.Options{Dir: r.Dir, PolicyFile: policyFile, Profile: prof, Providers: providers(nil), SessionID: r.SessionID, Store: st, UntrustedRepo: r.Untrusted, Sandbox: sb})
		if err != nil {
			return nil, nil, err
		}
		if note != nil {
			for _, n := range env.Notes {
				note(r.SessionID, n)
			}
		}
		return env.Engine, env.Close, nil
	}
}

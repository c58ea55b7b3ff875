package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/action"
	"github.com/agentos/agentos/runtime/provider"
)

func TestActionInputsBecomeTheProfile(t *testing.T) {
	env := action.Env{Inputs: action.Inputs{Provider: "openai", Model: "gpt-x", BaseURL: "http://127.0.0.1:11434/v1", OpenAIKey: "sk-input", MaxTurns: 12, MaxCostUSD: 0.5, Timeout: 7 * time.Minute}}
	get := actionEnv(env, func(k string) string {
		if k == "AGENTOS_SCRIPT" {
			return "from-process-env"
		}
		return ""
	})
	prof, err := provider.LoadProfile("", get)
	if err != nil {
		t.Fatal(err)
	}
	if prof.Provider != "openai" || prof.Model != "gpt-x" || prof.BaseURL != "http://127.0.0.1:11434/v1" || prof.APIKey != "sk-input" {
		t.Errorf("profile = %+v", prof)
	}
	if prof.Limits.MaxTurns != 12 || prof.Limits.MaxCostUSD != 0.5 || prof.Limits.WallClock.D() != 7*time.Minute {
		t.Errorf("limits = %+v", prof.Limits)
	}
	if get("AGENTOS_SCRIPT") != "from-process-env" {
		t.Error("variables the inputs do not set must come from the process")
	}
}

func TestActionWithoutItsEnvironmentIsAUsageError(t *testing.T) {
	var out strings.Builder
	err := runAction(context.Background(), func(string) string { return "" }, action.Deps{}, &out)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != exitUsage {
		t.Fatalf("err = %v, want a usage error", err)
	}
	if !strings.Contains(out.String(), "::error::") || !strings.Contains(out.String(), "GITHUB_EVENT_PATH") {
		t.Errorf("no ::error:: annotation naming what is missing:\n%s", out.String())
	}
}

// The step's exit code follows the outcome (docs/action-reference.md,
// "Exit codes"): what a maintainer is still to do, or what needed doing
// nothing, succeeds; a run that did not do what was asked fails.
func TestActionExitFollowsTheSession(t *testing.T) {
	for _, c := range []struct {
		status, reason string
		want           int
	}{
		{"completed", "", exitOK},
		{"paused", "", exitOK},
		{"reviewed", "", exitOK},
		{"triaged", "", exitOK},
		{"ignored", "", exitOK},
		{"refused", "", exitOK},
		{"failed", "", exitRunFailed},
		{"failed", action.ExitFailed, exitRunFailed},
		{"denied", action.ExitDenied, exitBlocked},
		{"cancelled", action.ExitCancelled, exitBlocked},
		{"completed", action.ExitTestsNotRun, exitRunFailed},
		{"paused", action.ExitTestsNotRun, exitRunFailed},
		{"completed", action.ExitNoChange, exitRunFailed},
		{"failed", action.ExitPRsNotPermitted, exitFailure},
		{"not_started", action.ExitNotStarted, exitFailure},
	} {
		err := actionExit(action.Outputs{SessionID: "7-abc", Status: c.status, ExitReason: c.reason})
		if got := exitCode(err, io.Discard); got != c.want {
			t.Errorf("status %s, reason %q: exit %d, want %d", c.status, c.reason, got, c.want)
		}
	}
}

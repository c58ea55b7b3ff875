package dispatch

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentos/agentos/bot/auth"
	"github.com/agentos/agentos/runtime/run"
)

// unreachable stands for a dependency a test's triggers must never
// reach: any call through it panics with what was called, so a test
// that got that far fails loudly.
type unreachable struct {
	GitHub
	Git
}

func (unreachable) Authorize(context.Context, auth.Request) auth.Decision {
	panic("the test's trigger reached the authorizer")
}

// newTestDispatcher builds a dispatcher through New with c, the required
// dependencies c leaves unset filled with ones a trigger must never
// reach (calling them panics), and the bot's login agentos[bot].
func newTestDispatcher(t *testing.T, c Config) *Dispatcher {
	t.Helper()
	var u unreachable
	if c.BotLogin == "" {
		c.BotLogin = "agentos[bot]"
	}
	if c.GitHub == nil {
		c.GitHub = u
	}
	if c.Auth == nil {
		c.Auth = u
	}
	if c.Git == nil {
		c.Git = u
	}
	if c.Runs == nil {
		c.Runs = run.NewManager(nil)
	}
	if c.Engines == nil {
		c.Engines = func(context.Context, EngineRequest) (*run.Engine, func(), error) {
			panic("the test's trigger reached the engines")
		}
	}
	d, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// New refuses a configuration that lacks a required dependency or holds
// an invalid setting, naming what is wrong, instead of a dispatcher that
// fails on its first trigger.
func TestNewChecksTheConfig(t *testing.T) {
	var u unreachable
	engines := func(context.Context, EngineRequest) (*run.Engine, func(), error) { return nil, nil, errors.New("none") }
	full := Config{BotLogin: "agentos[bot]", GitHub: u, Auth: u, Git: u, Runs: run.NewManager(nil), Engines: engines}
	if _, err := New(full); err != nil {
		t.Fatalf("a complete config: %v", err)
	}
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no login", func(c *Config) { c.BotLogin = "" }, "missing BotLogin"},
		{"no GitHub", func(c *Config) { c.GitHub = nil }, "missing GitHub"},
		{"no authorizer", func(c *Config) { c.Auth = nil }, "missing Auth"},
		{"no git", func(c *Config) { c.Git = nil }, "missing Git"},
		{"no runs", func(c *Config) { c.Runs = nil }, "missing Runs"},
		{"no engines", func(c *Config) { c.Engines = nil }, "missing Engines"},
		{"two missing", func(c *Config) { c.Git, c.Engines = nil, nil }, "missing Git, Engines"},
		{"bad branch prefix", func(c *Config) { c.BranchPrefix = "agent..x/" }, "branch prefix"},
		{"server URL not http", func(c *Config) { c.ServerURL = "github.com" }, "server URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := full
			tt.edit(&c)
			d, err := New(c)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.want) || d != nil {
				t.Fatalf("New = %v, %v; want an ErrConfig naming %q", d, err, tt.want)
			}
		})
	}
}

// OwnPlane fills the cycles left unset with the dispatcher's own
// workflow plane, bound to that dispatcher; a cycle set explicitly stays.
func TestNewWiresTheOwnPlane(t *testing.T) {
	d := newTestDispatcher(t, Config{Workflows: &Workflows{OwnPlane: true}})
	rp, ok := d.workflows.Reviewer.(*workflowPlane)
	tp, ok2 := d.workflows.Triager.(*workflowPlane)
	if !ok || !ok2 || rp.D != d || tp.D != d {
		t.Fatalf("own plane: reviewer %T, triager %T", d.workflows.Reviewer, d.workflows.Triager)
	}
	mine := &workflowPlane{}
	d = newTestDispatcher(t, Config{Workflows: &Workflows{OwnPlane: true, Triager: mine}})
	if d.workflows.Triager != mine {
		t.Fatal("an explicit triager was replaced by the own plane")
	}
	if d = newTestDispatcher(t, Config{}); d.workflows.Reviewer != nil || d.workflows.Triager != nil {
		t.Fatal("no Workflows wired cycles")
	}
}

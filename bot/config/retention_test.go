package config

import (
	"errors"
	"flag"
	"strings"
	"testing"
	"time"
)

func TestParseRetention(t *testing.T) {
	day := 24 * time.Hour
	for in, want := range map[string]time.Duration{
		"90d": 90 * day, "1d": day, "36h": 36 * time.Hour, "forever": 0, "Forever": 0, "0": 0, "0d": 0, " 14d ": 14 * day,
	} {
		if got, err := ParseRetention(in); err != nil || got != want {
			t.Errorf("ParseRetention(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1d", "-5h", "ninety days", "1.5d", "d", "30 d", "1w"} {
		if d, err := ParseRetention(in); err == nil {
			t.Errorf("ParseRetention(%q) = %v; want an error", in, d)
		}
	}
	for _, d := range []time.Duration{0, 90 * day, 36 * time.Hour} {
		if got, err := ParseRetention(FormatRetention(d)); err != nil || got != d {
			t.Errorf("FormatRetention(%v) = %q does not read back (%v, %v)", d, FormatRetention(d), got, err)
		}
	}
}

func TestRetentionDefaults(t *testing.T) {
	c := Default()
	if c.Retention.Sessions != 0 || c.Retention.Deliveries != DefaultDeliveryRetention {
		t.Fatalf("default retention = %+v", c.Retention)
	}
}

func TestRetentionFile(t *testing.T) {
	c, err := Parse("c.yaml", strings.NewReader("retention:\n  sessions: 90d\n  deliveries: 14d\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Retention.Sessions != 90*24*time.Hour || c.Retention.Deliveries != 14*24*time.Hour {
		t.Fatalf("retention = %+v", c.Retention)
	}
	for doc, want := range map[string]string{
		"retention:\n  sessions: soon\n":      `c.yaml:2:3: retention: sessions "soon" is not a period`,
		"retention:\n  session: 90d\n":        `unknown key "session" (known: sessions, deliveries)`,
		"retention: 90d\n":                    "must be a mapping",
		"retention:\n  deliveries: [1d]\n":    "deliveries must be a period",
		"retention:\n  deliveries: -3d\n":     `"-3d" is not a number of days`,
		"retention:\n  sessions: 90d\n  x: 1": "unknown key",
	} {
		_, err := Parse("c.yaml", strings.NewReader(doc))
		var pe *ParseError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v; want a *ParseError with %q", doc, err, want)
		}
	}
	// Bounds are checked by Validate, naming the file line.
	c, err = Parse("c.yaml", strings.NewReader("retention:\n  deliveries: 1d\n  sessions: 2h\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Validate()
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field("retention.deliveries") == nil || ve.Field("retention.sessions") == nil {
		t.Fatalf("Validate = %v; want both retention periods refused", err)
	}
	if src := ve.Field("retention.deliveries").Source; src != "c.yaml:1" {
		t.Errorf("source = %q; want c.yaml:1", src)
	}
}

func TestRetentionEnvAndFlags(t *testing.T) {
	env := map[string]string{EnvRetentionSessions: "120d", EnvRetentionDeliveries: "forever"}
	getenv := func(k string) string { return env[k] }
	load := func(args ...string) (Config, error) {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		f := BindFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return f.Load(getenv)
	}
	c, err := load()
	if err != nil || c.Retention.Sessions != 120*24*time.Hour || c.Retention.Deliveries != 0 {
		t.Fatalf("env: %+v, %v", c.Retention, err)
	}
	c, err = load("--retention-sessions", "7d", "--retention-deliveries", "10d")
	if err != nil || c.Retention.Sessions != 7*24*time.Hour || c.Retention.Deliveries != 10*24*time.Hour {
		t.Fatalf("flags over env: %+v, %v", c.Retention, err)
	}
	_, err = load("--retention-sessions", "a while")
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field("retention.sessions") == nil || ve.Field("retention.sessions").Source != "--retention-sessions" {
		t.Fatalf("bad flag: %v", err)
	}
	env[EnvRetentionDeliveries] = "3 weeks"
	_, err = load()
	var ee *EnvError
	if !errors.As(err, &ee) || ee.Var != EnvRetentionDeliveries {
		t.Fatalf("bad env: %v", err)
	}
	env[EnvRetentionDeliveries] = "2d"
	_, err = load()
	if !errors.As(err, &ve) || ve.Field("retention.deliveries") == nil || ve.Field("retention.deliveries").Source != "env "+EnvRetentionDeliveries {
		t.Fatalf("too short from env: %v", err)
	}
}

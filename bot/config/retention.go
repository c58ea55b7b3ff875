package config

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Retention: how long `agentos serve` keeps what it stores
// (docs/operations.md, "Retention"). Zero keeps for ever.
type Retention struct {
	// Sessions is how long the events of a session that ended (its run
	// wrote its terminal report and closed the session) are kept after
	// its last event (retention.sessions / AGENTOS_RETENTION_SESSIONS /
	// --retention-sessions). Default 0: kept for ever. Paused and
	// running sessions are never deleted.
	Sessions time.Duration
	// Deliveries is how long a finished webhook delivery (processed,
	// ignored or dead-lettered) stays in the queue after it finished
	// (retention.deliveries / AGENTOS_RETENTION_DELIVERIES /
	// --retention-deliveries). Default 30 days. While it is stored, a
	// redelivery of it is recognised as a duplicate.
	Deliveries time.Duration
}

// Retention defaults and bounds.
const (
	DefaultDeliveryRetention = 30 * 24 * time.Hour
	// MinDeliveryRetention: GitHub lets a delivery be redelivered for 3
	// days; a delivery forgotten sooner would be processed again.
	MinDeliveryRetention = 3 * 24 * time.Hour
	// MinSessionRetention guards against a unit mistake (90s for 90d).
	MinSessionRetention = 24 * time.Hour
)

// Environment variables of the retention settings.
const (
	EnvRetentionSessions   = "AGENTOS_RETENTION_SESSIONS"
	EnvRetentionDeliveries = "AGENTOS_RETENTION_DELIVERIES"
)

// ParseRetention reads a retention period: a number of days ("90d"), a
// Go duration ("36h"), or "forever" (also "0" or "0d": keep for ever).
// Negative or malformed values are errors.
func ParseRetention(s string) (time.Duration, error) {
	v := strings.TrimSpace(s)
	switch strings.ToLower(v) {
	case "forever", "0", "0d":
		return 0, nil
	case "":
		return 0, fmt.Errorf("is empty: give a period like 30d or 36h, or forever")
	}
	if n, ok := strings.CutSuffix(v, "d"); ok {
		days, err := strconv.ParseInt(n, 10, 32)
		if err != nil || days < 0 {
			return 0, fmt.Errorf("%q is not a number of days (like 30d)", v)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%q is not a period like 30d or 36h, or forever", v)
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", v)
	}
	return d, nil
}

// FormatRetention writes a period the way ParseRetention reads it.
func FormatRetention(d time.Duration) string {
	switch {
	case d == 0:
		return "forever"
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

// retentionSetting decodes the file's retention mapping.
func retentionSetting(v *yaml.Node, c *Config) error {
	if v.Kind != yaml.MappingNode {
		return fmt.Errorf("must be a mapping like {sessions: 90d, deliveries: 30d}")
	}
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		var dst *time.Duration
		switch k.Value {
		case "sessions":
			dst = &c.Retention.Sessions
		case "deliveries":
			dst = &c.Retention.Deliveries
		default:
			return fmt.Errorf("unknown key %q (known: sessions, deliveries)", k.Value)
		}
		if val.Kind != yaml.ScalarNode {
			return fmt.Errorf("%s must be a period like 30d or 36h, or forever", k.Value)
		}
		d, err := ParseRetention(val.Value)
		if err != nil {
			return fmt.Errorf("%s %v", k.Value, err)
		}
		*dst = d
	}
	return nil
}

// applyRetentionEnv overlays AGENTOS_RETENTION_SESSIONS and
// AGENTOS_RETENTION_DELIVERIES.
func (c *Config) applyRetentionEnv(getenv func(string) string) []error {
	var errs []error
	for _, e := range []struct {
		name, field string
		dst         *time.Duration
	}{
		{EnvRetentionSessions, "retention.sessions", &c.Retention.Sessions},
		{EnvRetentionDeliveries, "retention.deliveries", &c.Retention.Deliveries},
	} {
		v := strings.TrimSpace(getenv(e.name))
		if v == "" {
			continue
		}
		d, err := ParseRetention(v)
		if err != nil {
			errs = append(errs, &EnvError{Var: e.name, Err: err})
			continue
		}
		*e.dst = d
		c.setSource(e.field, "env "+e.name)
	}
	return errs
}

// retentionFlags are --retention-sessions and --retention-deliveries.
type retentionFlags struct {
	sessions, deliveries string
}

func (r *retentionFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&r.sessions, "retention-sessions", "", "delete the events of sessions that ended longer ago than this: 90d, 36h, or forever (default forever; $"+EnvRetentionSessions+")")
	fs.StringVar(&r.deliveries, "retention-deliveries", "", "forget finished webhook deliveries after this: 30d, or forever (default "+FormatRetention(DefaultDeliveryRetention)+"; $"+EnvRetentionDeliveries+")")
}

// apply sets the flags given on the command line; a malformed value is a
// *FieldError naming the flag.
func (r *retentionFlags) apply(given map[string]bool, c *Config) error {
	var probs []*FieldError
	for _, f := range []struct {
		flag, field, v string
		dst            *time.Duration
	}{
		{"retention-sessions", "retention.sessions", r.sessions, &c.Retention.Sessions},
		{"retention-deliveries", "retention.deliveries", r.deliveries, &c.Retention.Deliveries},
	} {
		if !given[f.flag] {
			continue
		}
		d, err := ParseRetention(f.v)
		if err != nil {
			probs = append(probs, &FieldError{Field: f.field, Source: "--" + f.flag, Problem: err.Error()})
			continue
		}
		*f.dst = d
		c.setSource(f.field, "--"+f.flag)
	}
	if len(probs) > 0 {
		return &ValidationError{Problems: probs}
	}
	return nil
}

// validateRetention checks the bounds of the retention periods.
func (c Config) validateRetention(bad func(field, format string, args ...any)) {
	if d := c.Retention.Sessions; d != 0 && d < MinSessionRetention {
		bad("retention.sessions", "%s is shorter than %s (0 or forever keeps sessions)", FormatRetention(d), FormatRetention(MinSessionRetention))
	}
	if d := c.Retention.Deliveries; d != 0 && d < MinDeliveryRetention {
		bad("retention.deliveries", "%s is shorter than %s, the time GitHub allows a delivery to be redelivered (a delivery forgotten sooner would be handled twice)", FormatRetention(d), FormatRetention(MinDeliveryRetention))
	}
}

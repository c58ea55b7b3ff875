package access

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

type countingUsers struct {
	n     atomic.Int32
	login string
	err   error
}

func (u *countingUsers) Login(context.Context, string) (string, error) {
	u.n.Add(1)
	return u.login, u.err
}

// TestUserTokenResolution: only GitHub-shaped tokens reach GitHub; a
// resolved token is remembered for UserTokenTTL, a refused one never; the
// operator's token wins.
func TestUserTokenResolution(t *testing.T) {
	now := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	u := &countingUsers{login: "rita"}
	c, err := New(Options{Token: "operator-token-0123", Users: u, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ident := func(tok string) (Principal, error) {
		r := httptest.NewRequest("GET", "/v1/runs", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		return c.Identify(r)
	}
	for _, bad := range []string{"nope", "ghu_short", "ghs_installationToken0123456789abcdef", "ghu_" + strings.Repeat("a", 600), "ghu_0123456789abcdef0123<script>"} {
		if _, err := ident(bad); !errors.Is(err, ErrBadBearer) {
			t.Errorf("%.12s…: %v, want ErrBadBearer", bad, err)
		}
	}
	if u.n.Load() != 0 {
		t.Fatalf("%d GitHub lookups for strings that are no user tokens", u.n.Load())
	}
	tok := "ghu_0123456789abcdef0123456789abcdef"
	for i := 0; i < 3; i++ {
		p, err := ident(tok)
		if err != nil || p.Kind != User || p.Login != "rita" || !p.Bearer || p.CSRF() != "" {
			t.Fatalf("user token: %+v %v", p, err)
		}
	}
	if u.n.Load() != 1 {
		t.Errorf("%d lookups for three reads within the TTL", u.n.Load())
	}
	now = now.Add(time.Minute)
	ident(tok)
	if u.n.Load() != 2 {
		t.Errorf("%d lookups: a remembered token outlived the TTL", u.n.Load())
	}
	u.err = ErrUserTokenRejected
	now = now.Add(time.Minute)
	for i := 0; i < 2; i++ {
		if _, err := ident(tok); !errors.Is(err, ErrUserTokenRejected) {
			t.Errorf("refused token: %v", err)
		}
	}
	if u.n.Load() != 4 {
		t.Errorf("%d lookups: a refusal was remembered", u.n.Load())
	}
	if p, err := ident("operator-token-0123"); err != nil || p.Kind != Operator {
		t.Errorf("operator: %+v %v", p, err)
	}
	// Without Users, only the operator's token is a bearer token.
	c2, _ := New(Options{Token: "operator-token-0123"})
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	if _, err := c2.Identify(r); !errors.Is(err, ErrBadBearer) {
		t.Errorf("no Users: %v", err)
	}
}

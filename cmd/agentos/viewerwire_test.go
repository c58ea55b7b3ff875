package main

import (
	"strings"
	"testing"
)

func TestViewerSettings(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	long := strings.Repeat("s", 32)
	good := map[string]string{envViewerSecret: long, envClientID: "Iv1.abc", envClientSecret: "shh", envPublicURL: "https://agentos.example.com/"}
	s, err := loadViewerSettings(env(good))
	if err != nil || !s.signIn() || s.publicURL != "https://agentos.example.com" {
		t.Fatalf("good settings: %+v, %v", s, err)
	}
	o, err := s.oauth("")
	if err != nil || o.WebURL != "https://github.com" || o.APIURL != "https://api.github.com" || o.CallbackURL != "https://agentos.example.com/login/callback" {
		t.Errorf("oauth = %+v, %v", o, err)
	}
	if o, _ := s.oauth("https://ghe.example.com/api/v3"); o.WebURL != "https://ghe.example.com" {
		t.Errorf("GHES web URL = %s", o.WebURL)
	}
	ck, err := s.checker("operator-token-0123456789")
	if err != nil || !ck.Secure() {
		t.Errorf("an https public URL must make cookies Secure: %v", err)
	}
	bad := []map[string]string{
		{envViewerSecret: "short"},
		{envClientID: "Iv1.abc"}, // no secret, no public URL
		{envClientID: "Iv1.abc", envClientSecret: "shh"},
		{envPublicURL: "agentos.example.com"},
		{envViewerSecret: long, envViewerSecret + "_FILE": "/x"},
	}
	for _, m := range bad {
		if _, err := loadViewerSettings(env(m)); err == nil {
			t.Errorf("%v: accepted", m)
		}
	}
	if s, err := loadViewerSettings(env(nil)); err != nil || s.signIn() {
		t.Errorf("no settings: %+v %v (the viewer still serves operators)", s, err)
	}
}

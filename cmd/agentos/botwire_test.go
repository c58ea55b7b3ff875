package main

import "testing"

func TestGitBaseURL(t *testing.T) {
	tests := []struct{ api, want string }{
		{"", "https://github.com"},
		{"https://api.github.com/", "https://github.com"},
		{"https://api.github.com", "https://github.com"},
		{"https://ghe.example.com/api/v3", "https://ghe.example.com"},
		{"https://ghe.example.com/api/v3/", "https://ghe.example.com"},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8080"},
	}
	for _, tt := range tests {
		got, err := gitBaseURL(tt.api)
		if err != nil || got != tt.want {
			t.Errorf("gitBaseURL(%q) = %q, %v; want %q", tt.api, got, err, tt.want)
		}
	}
	if _, err := gitBaseURL("::not a url"); err == nil {
		t.Error("a malformed URL was accepted")
	}
}

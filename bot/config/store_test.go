package config

import (
	"bytes"
	"flag"
	"log/slog"
	"strings"
	"testing"
)

func TestStoreURL(t *testing.T) {
	load := func(args []string, env map[string]string) (Config, error) {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		f := BindFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return f.Load(func(k string) string { return env[k] })
	}
	c, err := load(nil, map[string]string{EnvDatabaseURL: "postgres://agentos:s3cretpw@db:5432/agentos", EnvReplicaID: "replica-1"})
	if err != nil || c.StoreURL != "postgres://agentos:s3cretpw@db:5432/agentos" || c.ReplicaID != "replica-1" {
		t.Fatalf("%+v %v", c, err)
	}
	c, err = load([]string{"--store", "postgresql://x@h/db"}, map[string]string{EnvDatabaseURL: "postgres://y@h/db"})
	if err != nil || c.StoreURL != "postgresql://x@h/db" {
		t.Fatalf("--store must win over the environment: %q %v", c.StoreURL, err)
	}
	if _, err := load([]string{"--store", "mysql://u:pw@h/db"}, nil); err == nil || !strings.Contains(err.Error(), "store") || strings.Contains(err.Error(), "pw@") {
		t.Fatalf("a non-PostgreSQL URL: %v", err)
	}
	if _, err := load(nil, map[string]string{EnvReplicaID: "bad id!"}); err == nil {
		t.Fatal("a bad replica id was accepted")
	}
	var buf bytes.Buffer
	c, _ = load(nil, map[string]string{EnvDatabaseURL: "postgres://agentos:s3cretpw@db/agentos?password=other"})
	slog.New(slog.NewTextHandler(&buf, nil)).Info("cfg", "config", c)
	if strings.Contains(buf.String(), "s3cretpw") || strings.Contains(buf.String(), "other") || !strings.Contains(buf.String(), "db/agentos") {
		t.Fatalf("logged config: %s", buf.String())
	}
}

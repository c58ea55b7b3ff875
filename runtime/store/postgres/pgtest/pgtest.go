// Package pgtest gives each test run a fresh PostgreSQL database.
//
// The server is AGENTOS_TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/postgres, trust auth). Each call of
// URL creates a database agentos_test_<random> and drops it when the test
// ends. A server that cannot be reached skips the test with a loud
// message, except under CI=true, where it fails.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultServer is the server tests use unless AGENTOS_TEST_DATABASE_URL is set.
const DefaultServer = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

func server() string {
	if u := os.Getenv("AGENTOS_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultServer
}

// URL creates a fresh database and returns its connection string.
func URL(tb testing.TB) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, server())
	if err != nil {
		unavailable(tb, err)
	}
	defer admin.Close(context.Background())
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "agentos_test_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("pgtest: create database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, server())
		if err != nil {
			tb.Logf("pgtest: drop %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Logf("pgtest: drop %s: %v", name, err)
		}
	})
	u, err := url.Parse(server())
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// Pool creates a fresh database and returns a pool on it, closed when the
// test ends (before the database is dropped).
func Pool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	u := URL(tb)
	p, err := pgxpool.New(context.Background(), u)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(p.Close)
	return p
}

func unavailable(tb testing.TB, err error) {
	tb.Helper()
	msg := fmt.Sprintf("pgtest: PostgreSQL at %s is not reachable (%v): start PostgreSQL 15 with trust auth on 127.0.0.1:5432, or set AGENTOS_TEST_DATABASE_URL", server(), err)
	if os.Getenv("CI") == "true" {
		tb.Fatal(msg + " — under CI=true a missing server is a failure")
	}
	fmt.Fprintln(os.Stderr, "!!!!! SKIPPING POSTGRESQL TEST: "+msg)
	tb.Skip("!!!!! " + msg)
}

// Schema creates a fresh schema in the database at dbURL and returns a
// connection string whose search_path is that schema, so that several
// independent stores can share one test database.
func Schema(tb testing.TB, dbURL string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		unavailable(tb, err)
	}
	defer c.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "s_" + hex.EncodeToString(b[:])
	if _, err := c.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		tb.Fatalf("pgtest: create schema: %v", err)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String()
}

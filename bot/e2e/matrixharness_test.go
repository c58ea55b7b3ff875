//go:build chaos

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/internal/fakegithub"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// gate holds one HTTP request that matches, announces it, and lets it go
// on only when released: the stop matrix uses it to hold a replica at a
// precise point (a model call in flight, an approval review being posted,
// a push in progress) while the signal is sent.
type gate struct {
	next  http.Handler
	mu    sync.Mutex
	match func(r *http.Request) bool // nil: disarmed
	// hit is closed when a request matched; held is that request's
	// "METHOD path".
	hit     chan struct{}
	held    string
	release chan struct{}
}

func newGate(next http.Handler) *gate { return &gate{next: next} }

// arm holds the next request match accepts (once). It returns the
// channel closed when one is held.
func (g *gate) arm(match func(r *http.Request) bool) <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.match, g.hit, g.release = match, make(chan struct{}), make(chan struct{})
	return g.hit
}

// let lets the held request (or the next one, if none is held yet) go on
// and disarms the gate.
func (g *gate) let() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.match = nil
	if g.release != nil {
		select {
		case <-g.release:
		default:
			close(g.release)
		}
	}
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	var release chan struct{}
	if g.match != nil && g.match(r) {
		g.match = nil
		g.held = r.Method + " " + r.URL.Path
		release = g.release
		close(g.hit)
	}
	g.mu.Unlock()
	if release != nil {
		// The request is held until released; a client that died
		// meanwhile (SIGKILL) still has its request served, as a server
		// that received it would: the effect exists, the client never
		// learns it.
		select {
		case <-release:
		case <-time.After(2 * time.Minute):
		}
	}
	g.next.ServeHTTP(w, r)
}

// serveHandler serves h on a free loopback port until the test ends.
func serveHandler(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

// startGatedGitHub is startGitHub with every request passing through a
// gate first.
func startGatedGitHub(ctx context.Context, t *testing.T) (fake *fakegithub.Fake, url, bare string, g *gate) {
	t.Helper()
	fake = fakegithub.New(t)
	g = newGate(fake)
	url = serveHandler(t, g)
	fake.SetURL(url)
	t.Cleanup(fake.Close) // stop posting deliveries before the servers close
	files, err := sampleFiles()
	if err != nil {
		t.Fatal(err)
	}
	if bare, err = fake.AddGitRepo(ctx, fakegithub.Repo{Owner: owner, Name: name}, t.TempDir(), files); err != nil {
		t.Fatal(err)
	}
	fake.AddToken(aliceTok, maintainer)
	fake.SetPermission(repoName, maintainer, fakegithub.PermMaintain)
	return fake, url, bare, g
}

// balancer is the load-balancer stand-in in front of the replicas: each
// webhook delivery goes to the next replica in turn, and to the one after
// it when a replica does not answer or answers 5xx (a proxy with retries,
// or GitHub's redelivery, does that), all within GitHub's 10 s.
type balancer struct {
	mu    sync.Mutex
	addrs []string // replica i's base URL ("" until it first listens); a stopped replica's stays until its restart
	next  int
	// tries counts the attempts a replica refused or did not answer.
	tries int
}

func (b *balancer) set(i int, url string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.addrs[i] = url
}

// aim sends the next delivery to replica i first.
func (b *balancer) aim(i int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.next = i
}

func (b *balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	client := &http.Client{Timeout: 3 * time.Second}
	deadline := time.Now().Add(9 * time.Second)
	b.mu.Lock()
	start := b.next
	b.next++
	n := len(b.addrs)
	b.mu.Unlock()
	var last string
	for try := 0; time.Now().Before(deadline); try++ {
		i := (start + try) % n
		b.mu.Lock()
		addr := b.addrs[i]
		b.mu.Unlock()
		if addr == "" {
			if try%n == n-1 {
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodPost, addr+r.URL.Path, bytes.NewReader(body))
		for _, k := range []string{"Content-Type", "User-Agent", "X-GitHub-Event", "X-GitHub-Delivery", "X-Hub-Signature-256"} {
			req.Header.Set(k, r.Header.Get(k))
		}
		resp, err := client.Do(req)
		if err == nil && resp.StatusCode < 500 {
			w.WriteHeader(resp.StatusCode)
			_, _ = io.Copy(w, resp.Body)
			resp.Body.Close()
			return
		}
		if err == nil {
			last = resp.Status
			resp.Body.Close()
		} else {
			last = err.Error()
		}
		b.mu.Lock()
		b.tries++
		b.mu.Unlock()
		if try%n == n-1 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	http.Error(w, "no replica answered: "+last, http.StatusBadGateway)
}

// replicaSet is three `agentos serve --store postgres://…` replicas, each
// with its own data directory (git mirror, worktrees) and name.
type replicaSet struct {
	bin  string
	env  map[string]string
	lb   *balancer
	mu   sync.Mutex
	ps   []*serveProc
	ids  []string
	data []string
	// logs keeps the output of the processes that ended.
	logs strings.Builder
}

func startReplicas(ctx context.Context, t *testing.T, bin string, env map[string]string, n int) *replicaSet {
	t.Helper()
	rs := &replicaSet{bin: bin, env: env, lb: &balancer{addrs: make([]string, n)}}
	for i := range n {
		rs.ids = append(rs.ids, fmt.Sprintf("replica-%d", i))
		rs.data = append(rs.data, t.TempDir())
		rs.ps = append(rs.ps, nil)
		rs.start(ctx, t, i)
	}
	t.Cleanup(func() {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		for _, p := range rs.ps {
			if p != nil && p.cmd.ProcessState == nil {
				_ = p.cmd.Process.Kill()
				<-p.done
			}
		}
	})
	return rs
}

// start (re)starts replica i under its name over its data directory.
func (rs *replicaSet) start(ctx context.Context, t *testing.T, i int) {
	t.Helper()
	env := make(map[string]string, len(rs.env)+1)
	for k, v := range rs.env {
		env[k] = v
	}
	env["AGENTOS_REPLICA_ID"] = rs.ids[i]
	p := startServeIn(ctx, t, rs.bin, env, rs.data[i])
	rs.mu.Lock()
	rs.ps[i] = p
	rs.mu.Unlock()
	rs.lb.set(i, p.url)
}

// index is the replica named id.
func (rs *replicaSet) index(id string) int {
	for i, n := range rs.ids {
		if n == id {
			return i
		}
	}
	return -1
}

func (rs *replicaSet) proc(i int) *serveProc {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.ps[i]
}

// allLogs is every process's output, the ended ones first.
func (rs *replicaSet) allLogs() string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var b strings.Builder
	b.WriteString(rs.logs.String())
	for i, p := range rs.ps {
		if p != nil {
			fmt.Fprintf(&b, "\n===== %s (running) =====\n%s", rs.ids[i], p.logs())
		}
	}
	return b.String()
}

// ended records replica i's output once its process is gone.
func (rs *replicaSet) ended(i int, how string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	fmt.Fprintf(&rs.logs, "\n===== %s (%s) =====\n%s", rs.ids[i], how, rs.ps[i].logs())
	rs.ps[i] = nil
}

// worker names the replica working the (only) session: the holder of its
// unexpired lease, else the replica that claimed an open delivery.
func worker(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	var owner string
	err := pool.QueryRow(ctx, `SELECT owner FROM agentos_leases WHERE expires_at > now() ORDER BY expires_at DESC LIMIT 1`).Scan(&owner)
	if err == nil {
		return owner, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", err
	}
	err = pool.QueryRow(ctx, `SELECT claimed_by FROM agentos_deliveries WHERE state = 'claimed' ORDER BY claimed_at DESC LIMIT 1`).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return owner, err
}

// Command loadgen posts signed issue_comment deliveries (bodies from
// @octokit/webhooks-examples, a fresh X-GitHub-Delivery each) at webhook
// servers on loopback addresses and reports, per server, at saturation and
// at a fixed rate: throughput, p50/p99 latency, and deliveries handled per
// CPU-second of the server process (utime+stime from /proc/<pid>/stat).
// Targets are measured in alternating order, round after round, so that
// drift of a shared machine hits them alike. Every phase is bounded in
// requests and in time.
//
//	go run ./bench/loadgen -secret S \
//	  -target ours=http://127.0.0.1:18091/webhook@PID -target probot=...@PID
package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

type target struct {
	name string
	url  string
	pid  int
}

type targetList []target

func (l *targetList) String() string { return fmt.Sprint(*l) }

// Set parses name=url@pid.
func (l *targetList) Set(s string) error {
	name, rest, ok := strings.Cut(s, "=")
	if !ok {
		return errors.New("want name=url@pid")
	}
	i := strings.LastIndex(rest, "@")
	if i < 0 {
		return errors.New("want name=url@pid")
	}
	pid, err := strconv.Atoi(rest[i+1:])
	if err != nil || pid <= 0 {
		return fmt.Errorf("bad pid in %q", s)
	}
	u, err := url.Parse(rest[:i])
	if err != nil {
		return err
	}
	if u.Scheme != "http" {
		return fmt.Errorf("%s: only http:// on loopback", u)
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%s: only loopback IP addresses are allowed", u)
	}
	*l = append(*l, target{name: name, url: u.String(), pid: pid})
	return nil
}

type config struct {
	secret      []byte
	bodies      [][]byte
	sigs        []string
	concurrency int
	satN        int
	satDur      time.Duration
	rate        int
	rateN       int
	rateDur     time.Duration
	warmup      int
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var targets targetList
	fs.Var(&targets, "target", "name=http://127.0.0.1:PORT/path@PID (repeat)")
	secret := fs.String("secret", "", "webhook secret")
	examples := fs.String("examples", webhookExamples(), "webhooks-examples api.github.com/index.json")
	rounds := fs.Int("rounds", 3, "rounds; targets alternate within and across rounds")
	conc := fs.Int("concurrency", 32, "concurrent requests at saturation")
	satN := fs.Int("sat-requests", 20000, "max requests per saturation phase")
	satDur := fs.Duration("sat-duration", 8*time.Second, "max duration of a saturation phase")
	rate := fs.Int("rate", 1000, "requests per second of the fixed-rate phase")
	rateDur := fs.Duration("rate-duration", 8*time.Second, "duration of the fixed-rate phase")
	warmup := fs.Int("warmup", 1000, "requests sent to each target before measuring")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(targets) == 0 || *secret == "" {
		return errors.New("need -secret and at least one -target")
	}
	if *rounds < 1 || *rounds > 20 || *conc < 1 || *conc > 1024 || *satN > 1_000_000 || *satDur > 5*time.Minute || *rate < 1 || *rate > 50_000 || *rateDur > 5*time.Minute {
		return errors.New("limits: rounds 1–20, concurrency 1–1024, sat-requests ≤ 1e6, durations ≤ 5m, rate 1–50000")
	}
	bodies, err := loadBodies(*examples)
	if err != nil {
		return err
	}
	cfg := &config{secret: []byte(*secret), bodies: bodies, concurrency: *conc, satN: *satN, satDur: *satDur,
		rate: *rate, rateN: int(float64(*rate) * rateDur.Seconds()), rateDur: *rateDur, warmup: *warmup}
	for _, b := range bodies {
		m := hmac.New(sha256.New, cfg.secret)
		m.Write(b)
		cfg.sigs = append(cfg.sigs, "sha256="+hex.EncodeToString(m.Sum(nil)))
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxConnsPerHost: 0, DisableCompression: true}, Timeout: 30 * time.Second}

	fmt.Fprintf(stdout, "loadgen: %d bodies (%d–%d bytes), %d rounds, saturation: %d concurrent, ≤%d req, ≤%s; fixed rate: %d req/s for %s\n",
		len(bodies), minLen(bodies), maxLen(bodies), *rounds, *conc, *satN, *satDur, *rate, *rateDur)
	for _, t := range targets {
		if _, err := phaseClosed(ctx, client, cfg, t, "warmup", min(*conc, 8), cfg.warmup, time.Minute); err != nil {
			return fmt.Errorf("%s warmup: %w", t.name, err)
		}
	}
	results := map[string][]result{}
	for r := 0; r < *rounds; r++ {
		order := slices.Clone(targets)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, t := range order {
			for _, phase := range []string{"saturation", "fixed"} {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				var res result
				var err error
				if phase == "saturation" {
					res, err = phaseClosed(ctx, client, cfg, t, phase, cfg.concurrency, cfg.satN, cfg.satDur)
				} else {
					res, err = phaseRate(ctx, client, cfg, t)
				}
				if err != nil {
					return fmt.Errorf("%s %s: %w", t.name, phase, err)
				}
				res.round = r + 1
				results[t.name+" "+phase] = append(results[t.name+" "+phase], res)
				fmt.Fprintf(stdout, "round %d %-8s %-10s %s\n", r+1, t.name, phase, res)
			}
		}
	}
	fmt.Fprintln(stdout, "\nmedian over rounds:")
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "server\tphase\treq/s\tp50 ms\tp99 ms\tdeliveries/CPU-s\tserver CPU %\terrors\t")
	for _, t := range targets {
		for _, phase := range []string{"saturation", "fixed"} {
			m := median(results[t.name+" "+phase])
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.2f\t%.2f\t%.0f\t%.0f\t%d\t\n", t.name, phase, m.rps, ms(m.p50), ms(m.p99), m.perCPU, m.cpuPct, m.errors)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, t := range targets {
		var n int64
		if c, ok := okCount.Load(t.url); ok {
			n = c.(*atomic.Int64).Load()
		}
		fmt.Fprintf(stdout, "%s: %d deliveries answered 2xx in total (warm-up included)\n", t.name, n)
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

type result struct {
	round          int
	n, errors      int
	elapsed        time.Duration
	rps            float64
	p50, p99       time.Duration
	cpu            time.Duration
	perCPU, cpuPct float64
	late           int
}

func (r result) String() string {
	s := fmt.Sprintf("%6d req %6.0f req/s  p50 %6.2f ms  p99 %7.2f ms  server CPU %5.2f s (%3.0f%%)  %6.0f deliveries/CPU-s  errors %d",
		r.n, r.rps, ms(r.p50), ms(r.p99), r.cpu.Seconds(), r.cpuPct, r.perCPU, r.errors)
	if r.late > 0 {
		s += fmt.Sprintf("  late %d", r.late)
	}
	return s
}

// median takes each figure's median over the rounds.
func median(rs []result) result {
	if len(rs) == 0 {
		return result{}
	}
	pick := func(f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	out := result{
		rps:    pick(func(r result) float64 { return r.rps }),
		p50:    time.Duration(pick(func(r result) float64 { return float64(r.p50) })),
		p99:    time.Duration(pick(func(r result) float64 { return float64(r.p99) })),
		perCPU: pick(func(r result) float64 { return r.perCPU }),
		cpuPct: pick(func(r result) float64 { return r.cpuPct }),
	}
	for _, r := range rs {
		out.errors += r.errors
	}
	return out
}

// newGUID returns a random (version 4) UUID: GitHub's delivery IDs are
// UUIDs, and their random order is what a store's dedup index must absorb
// (sequential IDs would flatter a B-tree).
func newGUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// okCount counts 2xx answers per target URL over the whole run, warm-up
// included, to compare with what the server says it stored.
var okCount sync.Map // url → *atomic.Int64

// post sends one delivery and reports whether it got a 2xx.
func post(ctx context.Context, client *http.Client, cfg *config, t target, i int) bool {
	k := i % len(cfg.bodies)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(cfg.bodies[k]))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/loadgen")
	req.Header.Set("X-GitHub-Event", "issue_comment")
	req.Header.Set("X-GitHub-Delivery", newGUID())
	req.Header.Set("X-Hub-Signature-256", cfg.sigs[k])
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return false
	}
	c, _ := okCount.LoadOrStore(t.url, new(atomic.Int64))
	c.(*atomic.Int64).Add(1)
	return true
}

// phaseClosed runs `workers` senders back to back (saturation).
func phaseClosed(ctx context.Context, client *http.Client, cfg *config, t target, name string, workers, n int, maxDur time.Duration) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, maxDur)
	defer cancel()
	cpu0, err := cpuTime(t.pid)
	if err != nil {
		return result{}, err
	}
	var next atomic.Int64
	var errs atomic.Int64
	lat := make([][]time.Duration, workers)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				ok := post(ctx, client, cfg, t, i)
				if ctx.Err() != nil {
					return // cut by the time bound: neither success nor failure
				}
				lat[w] = append(lat[w], time.Since(t0))
				if !ok {
					errs.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, err := cpuTime(t.pid)
	if err != nil {
		return result{}, err
	}
	return summarize(slices.Concat(lat...), int(errs.Load()), elapsed, cpu1-cpu0, 0), nil
}

// phaseRate sends cfg.rate requests per second on a fixed schedule (open
// loop). Latency counts from the scheduled send time, so a stalled server
// cannot hide its queueing delay.
func phaseRate(ctx context.Context, client *http.Client, cfg *config, t target) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.rateDur+30*time.Second)
	defer cancel()
	cpu0, err := cpuTime(t.pid)
	if err != nil {
		return result{}, err
	}
	interval := time.Second / time.Duration(cfg.rate)
	type job struct {
		i     int
		sched time.Time
	}
	jobs := make(chan job, 4096)
	var errs atomic.Int64
	const workers = 256
	lat := make([][]time.Duration, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				ok := post(ctx, client, cfg, t, j.i)
				lat[w] = append(lat[w], time.Since(j.sched))
				if !ok {
					errs.Add(1)
				}
			}
		}()
	}
	start := time.Now()
	late := 0
	for i := 0; i < cfg.rateN && ctx.Err() == nil; i++ {
		sched := start.Add(time.Duration(i) * interval)
		if d := time.Until(sched); d > 0 {
			time.Sleep(d)
		} else if -d > 10*time.Millisecond {
			late++ // the generator itself fell behind
		}
		jobs <- job{i: i, sched: sched}
	}
	close(jobs)
	wg.Wait()
	elapsed := time.Since(start)
	cpu1, err := cpuTime(t.pid)
	if err != nil {
		return result{}, err
	}
	return summarize(slices.Concat(lat...), int(errs.Load()), elapsed, cpu1-cpu0, late), nil
}

func summarize(lat []time.Duration, errs int, elapsed, cpu time.Duration, late int) result {
	slices.Sort(lat)
	r := result{n: len(lat), errors: errs, elapsed: elapsed, cpu: cpu, late: late}
	if len(lat) > 0 {
		r.p50 = lat[len(lat)*50/100]
		r.p99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	ok := len(lat) - errs
	r.rps = float64(ok) / elapsed.Seconds()
	if cpu > 0 {
		r.perCPU = float64(ok) / cpu.Seconds()
	}
	r.cpuPct = 100 * cpu.Seconds() / elapsed.Seconds()
	return r
}

// cpuTime is utime+stime of a process, from /proc/<pid>/stat (in USER_HZ
// ticks, 100 per second on Linux).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields resume after ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("unexpected /proc stat format")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("unexpected /proc stat format")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	st, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * (time.Second / 100), nil
}

// loadBodies returns the issue_comment "created" examples, compact.
func loadBodies(path string) ([][]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var index []struct {
		Name     string            `json:"name"`
		Examples []json.RawMessage `json:"examples"`
	}
	if err := json.Unmarshal(raw, &index); err != nil {
		return nil, err
	}
	var out [][]byte
	for _, ev := range index {
		if ev.Name != "issue_comment" {
			continue
		}
		for _, ex := range ev.Examples {
			var head struct {
				Action string `json:"action"`
			}
			if json.Unmarshal(ex, &head) == nil && head.Action == "created" {
				var b bytes.Buffer
				if err := json.Compact(&b, ex); err != nil {
					return nil, err
				}
				out = append(out, b.Bytes())
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no issue_comment.created examples in " + path)
	}
	return out, nil
}

func minLen(bs [][]byte) int {
	m := len(bs[0])
	for _, b := range bs {
		m = min(m, len(b))
	}
	return m
}

func maxLen(bs [][]byte) int {
	m := 0
	for _, b := range bs {
		m = max(m, len(b))
	}
	return m
}

// webhookExamples is where .ci/npm-deps.sh installs the webhook examples
// index: $AGENTOS_NPM_DIR (default ~/.cache/agentos-npm). The bench tree
// sits outside bot/, so it cannot import bot/internal/corpus; this is the
// same rule.
func webhookExamples() string {
	dir := os.Getenv("AGENTOS_NPM_DIR")
	if dir == "" {
		if home, err := os.UserHomeDir(); err == nil {
			dir = filepath.Join(home, ".cache", "agentos-npm")
		}
	}
	return filepath.Join(dir, "node_modules", "@octokit", "webhooks-examples", "api.github.com", "index.json")
}

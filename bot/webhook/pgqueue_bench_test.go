package webhook

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentos/agentos/bot/queue"
	"github.com/agentos/agentos/runtime/store/postgres/pgtest"
)

// BenchmarkReplicasAccept measures intake as GitHub sees it: signed
// issue_comment deliveries (a real payload, a new comment and a fresh ID
// each) POSTed over
// HTTP by 32 concurrent senders, round-robin over 1 or 3 replicas (each
// its own HTTP server, handler and PGQueue with its own pool) on one
// PostgreSQL; every 202 is a committed row. Reported: deliveries/s, p99 of
// one accept, CPU time per delivery of this process (senders, servers and
// handlers) and of the PostgreSQL server's processes, since everything
// shares one machine. The embedded LogQueue is the baseline in the same
// run.
//
//	go test -run '^$' -bench BenchmarkReplicasAccept -benchtime 3000x ./bot/webhook/
func BenchmarkReplicasAccept(b *testing.B) {
	comment := distinctComments(b)
	db := pgtest.URL(b)
	var run atomic.Int64
	for _, c := range []struct {
		name     string
		replicas int
		pg       bool
	}{{"log/replicas=1", 1, false}, {"postgres/replicas=1", 1, true}, {"postgres/replicas=3", 3, true}} {
		b.Run(c.name, func(b *testing.B) {
			var urls []string
			schema := ""
			if c.pg {
				schema = pgtest.Schema(b, db)
			}
			for i := 0; i < c.replicas; i++ {
				var q queue.Queue
				if c.pg {
					q = openPGQueueAt(b, schema, queue.PGQueueOptions{})
				} else {
					lq, err := queue.OpenLogQueue(filepath.Join(b.TempDir(), "q"))
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { lq.Close() })
					q = lq
				}
				srv := httptest.NewServer(newEngine(NewHandler(Config{Events: testEvents, Secrets: [][]byte{testSecret}}, q, nil)))
				b.Cleanup(srv.Close)
				urls = append(urls, srv.URL+"/webhook")
			}
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
			r := run.Add(1)
			var next atomic.Int64
			lat := make([]time.Duration, b.N)
			const senders = 32
			cpu0, pg0 := processCPU(b), postgresCPU()
			b.ResetTimer()
			var wg sync.WaitGroup
			for range senders {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i := int(next.Add(1)) - 1
						if i >= b.N {
							return
						}
						body, sig := comment(r<<32 | int64(i))
						req, _ := http.NewRequest(http.MethodPost, urls[i%len(urls)], bytes.NewReader(body))
						req.Header.Set("Content-Type", "application/json")
						req.Header.Set(EventHeader, "issue_comment")
						req.Header.Set(DeliveryHeader, fmt.Sprintf("bench-%d-%d", r, i))
						req.Header.Set(SignatureHeader, sig)
						start := time.Now()
						resp, err := client.Do(req)
						if err != nil {
							b.Error(err)
							return
						}
						resp.Body.Close()
						lat[i] = time.Since(start)
						if resp.StatusCode != http.StatusAccepted {
							b.Errorf("status %d", resp.StatusCode)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			slices.Sort(lat)
			n := float64(b.N)
			b.ReportMetric(n/b.Elapsed().Seconds(), "deliveries/s")
			b.ReportMetric(float64(lat[int(0.99*float64(len(lat)-1))].Microseconds())/1000, "p99-ms")
			b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/n, "cpu-µs/delivery")
			if c.pg {
				b.ReportMetric(float64((postgresCPU()-pg0).Microseconds())/n, "pg-cpu-µs/delivery")
			}
		})
	}
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// postgresCPU sums user+system time of the processes named postgres
// (the local server; 0 if /proc is unreadable).
func postgresCPU() time.Duration {
	ents, _ := os.ReadDir("/proc")
	var ticks int64
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(raw)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open || s[open+1:close] != "postgres" {
			continue
		}
		f := strings.Fields(s[close+2:])
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + st
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

// Package riverqueue measures River (github.com/riverqueue/river) against
// agentos's own delivery queues (bot/queue) on the same workload, in the
// same run: the evaluation behind docs/decisions.md's entry on the
// delivery queue. It is a module of its own so that River is not a
// dependency of agentos itself. Run from this directory:
//
//	go test -run '^$' -bench . -benchtime 2000x
package riverqueue

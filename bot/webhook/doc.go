// Package webhook owns the intake of GitHub webhooks: it verifies the
// signature on the raw body, reads only the routing fields, stores the
// delivery durably in a queue (bot/queue: LogQueue, an append-only
// group-committed log, for one process; PGQueue, a PostgreSQL table shared
// by replicas; in front of either a Spool, which keeps deliveries on local
// disk while the queue's store is down) and answers 202. It also defines
// what a delivery becomes: the normalised Trigger (Normalize), and the
// errors a dispatch wraps to tell the queue how to retry it (ErrBusy,
// ErrPermanent). bot/worker's Processor later claims each delivery,
// decodes it fully (go-github), drops the bot's own events, normalises
// the rest into one Trigger and hands it to the dispatcher. The
// Reconciler asks GitHub to redeliver what intake missed.
//
// Answers of the handler, in the order they are decided:
//
//	413 body larger than Config.MaxBody (read is bounded, never unbounded)
//	401 missing, malformed or wrong X-Hub-Signature-256 (before any parsing)
//	400 missing/invalid X-GitHub-Delivery, missing X-GitHub-Event
//	200 ping (not stored)
//	400 event the bot does not handle ("unsupported event"); GitHub shows
//	    these as failed deliveries, which tells the maintainer that the
//	    app subscribes to more than it needs
//	400 body that is not a JSON object (or a form without "payload")
//	200 {"duplicate":true} delivery ID already stored (also across restarts),
//	    or the same payload under another delivery ID: a replay (PayloadKey)
//	202 {"accepted":true} stored durably
//	503 the queue could not store it, nor its spool (GitHub marks the
//	    delivery failed; the reconciler, Reconciler, asks GitHub to
//	    redeliver it)
//
// Events and actions: the ones the dispatcher's route table takes
// (Config.Events and worker.Processor.Events, from dispatch.Events); any other
// event is answered 400 "unsupported event". Today:
//
//	issue_comment                created                  → Trigger kind comment
//	pull_request_review          submitted                → review
//	pull_request_review_comment  created                  → review_comment
//	pull_request                 closed, synchronize      → pr_closed, pr_synchronize
//	installation                 any                      → installation
//	installation_repositories    any                      → installation
//	ping                         (answered 200, not stored)
//
// Other actions of these events are stored and answered 202, then dropped
// by bot/worker's Processor with outcome "ignored".
package webhook

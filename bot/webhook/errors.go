package webhook

import "errors"

// What a dispatch error asks of the delivery queue (bot/worker's
// Processor reads them; bot/dispatch and the API wrap them).

// ErrPermanent, wrapped by a dispatch error, marks a delivery that no
// retry can fix: it fails at once.
var ErrPermanent = errors.New("permanent failure")

// ErrBusy, wrapped by a dispatch error, marks a delivery that must wait
// for someone else (another replica works its session): it is retried
// with backoff like any error, but never given up on for its number of
// attempts, since waiting is not failing.
var ErrBusy = errors.New("busy elsewhere")

package webhook

import "github.com/agentos/agentos/bot/queue"

// The queue moved to bot/queue; these names keep the handler's callers
// (bot/api, cmd/agentos) compiling while they move over to the queue
// package's own names (bot/worker uses them already).
type (
	// Delivery is queue.Delivery.
	Delivery = queue.Delivery
	// Queue is queue.Queue.
	Queue = queue.Queue
	// Releaser is queue.Releaser.
	Releaser = queue.Releaser
	// Notifier is queue.Notifier.
	Notifier = queue.Notifier
	// Record is queue.Record.
	Record = queue.Record
	// Lister is queue.Lister.
	Lister = queue.Lister
)

// Outcomes of a delivery (queue.OutcomeProcessed and the others).
const (
	OutcomeProcessed = queue.OutcomeProcessed
	OutcomeIgnored   = queue.OutcomeIgnored
	OutcomeFailed    = queue.OutcomeFailed
	OutcomeRetry     = queue.OutcomeRetry
)

// MaxListed bounds one listing (queue.MaxListed).
const MaxListed = queue.MaxListed

// DeliveryStates are the states a Lister lists (queue.DeliveryStates).
var DeliveryStates = queue.DeliveryStates

// OpenLogQueue opens the log queue in dir (queue.OpenLogQueue).
func OpenLogQueue(dir string) (*queue.LogQueue, error) { return queue.OpenLogQueue(dir) }

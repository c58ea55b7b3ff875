package dispatch

// Names the external tests use that are not the package's API.

// DeliverySessionID exposes deliverySessionID.
var DeliverySessionID = deliverySessionID

// The route table.
type (
	Route   = route
	Source  = source
	Refusal = refusal
)

const (
	Reply  = reply
	Record = record
)

var (
	Routes   = routes
	Lookup   = lookup
	HelpText = helpText
)

// The git side, as NewGitHubBot wires it.
type (
	Worktrees = worktrees
	GitData   = gitData
)

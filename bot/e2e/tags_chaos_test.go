//go:build chaos

package e2e

// binaryTags are the build tags of the agentos binary these tests start:
// under -tags chaos it has failpoints (kernel/failpoint), inert unless a
// test arms one.
const binaryTags = "chaos"

//go:build !chaos

package e2e

// binaryTags are the build tags of the agentos binary these tests start:
// the default build, as users get it.
const binaryTags = ""

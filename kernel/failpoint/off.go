//go:build !chaos || !unix

package failpoint

// Enabled: this build has no failpoints.
const Enabled = false

// Hit does nothing: this build has no failpoints.
func Hit(string) {}

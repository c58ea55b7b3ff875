//go:build !linux

package workspace

// readFileAt reads name relative to its directory's os.Root.
func readFileAt(d *dirHandle, name string) ([]byte, error) { return d.root.ReadFile(name) }

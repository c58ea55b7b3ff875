//go:build linux

package launch

import (
	"fmt"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// LandlockABI is the kernel's Landlock ABI version (0: not available).
func LandlockABI() (int, error) {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return 0, err
	}
	return v, nil
}

// presets are go-landlock's configurations by ABI version: each restricts
// everything its ABI can, with no silent downgrade.
var presets = []landlock.Config{landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5, landlock.V6, landlock.V7, landlock.V8, landlock.V9, landlock.V10, landlock.V11}

// applyLandlock restricts this process (all threads) to the ruleset with
// the kernel's own ABI: filesystem rules always; from ABI 4 TCP connect
// and bind only to the listed ports (the seccomp filter covers older
// kernels and other protocols), unless privateNet: in a network
// namespace of its own the command may use every port of its loopback,
// which is all there is; from ABI 6 signals and abstract unix sockets
// only within the sandbox; newer ABIs add what they restrict. Nothing is
// best effort: a rule the kernel cannot enforce is an error, never a
// silently weaker sandbox.
func applyLandlock(ll Landlock, privateNet bool) error {
	abi, err := LandlockABI()
	if err != nil || abi < 1 {
		return fmt.Errorf("landlock: not available (ABI %d): %v", abi, err)
	}
	if len(ll.ConnectTCP) > 0 && privateNet {
		return fmt.Errorf("landlock: TCP port rules for a command with a network namespace of its own")
	}
	if len(ll.ConnectTCP) > 0 && abi < 4 {
		return fmt.Errorf("landlock: ABI %d cannot restrict TCP ports (needs 4, Linux 6.7)", abi)
	}
	cfg := presets[min(abi, len(presets))-1]
	if privateNet {
		cfg.HandledAccessNet = 0
	}
	rules := []landlock.Rule{}
	if len(ll.RO) > 0 {
		rules = append(rules, landlock.RODirs(ll.RO...).IgnoreIfMissing())
	}
	if len(ll.ROFiles) > 0 {
		rules = append(rules, landlock.ROFiles(ll.ROFiles...).IgnoreIfMissing())
	}
	if len(ll.RW) > 0 {
		rw := landlock.RWDirs(ll.RW...)
		if abi >= 2 {
			// renames across directories inside the writable trees
			rw = rw.WithRefer()
		}
		rules = append(rules, rw)
	}
	if len(ll.RWFiles) > 0 {
		rules = append(rules, landlock.RWFiles(ll.RWFiles...).IgnoreIfMissing())
	}
	for _, p := range ll.ConnectTCP {
		rules = append(rules, landlock.ConnectTCP(p))
	}
	if err := cfg.Restrict(rules...); err != nil {
		return fmt.Errorf("landlock (ABI %d): %w", abi, err)
	}
	return nil
}

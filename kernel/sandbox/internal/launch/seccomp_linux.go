//go:build linux

package launch

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// seccompArch is the audit architecture of this build, and whether the
// platform is supported at all.
func seccompArch() (uint32, bool) {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64, true
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64, true
	}
	return 0, false
}

// seccompFilter builds the classic BPF program of a mode. Every mode
// refuses every syscall of another architecture (and the x32 ABI),
// io_uring (whose socket operations bypass a socket() filter), and
// socket() for families other than those below.
//
// Under Landlock (no-inet, tcp-only) the command shares the host's file
// system and network namespace, and Landlock does not govern connect() to
// a unix socket by path: socket(AF_UNIX) is refused, or a command could
// reach a database's or Docker's local socket (socketpair, which names no
// path, stays allowed). AF_NETLINK stays allowed. For AF_INET and
// AF_INET6, no-inet refuses everything; tcp-only allows only SOCK_STREAM
// with protocol 0 or IPPROTO_TCP (not MPTCP or SCTP, which Landlock's TCP
// rules do not see).
//
// Under Landlock in a network namespace of its own (private-net), the
// namespace has only loopback: AF_INET and AF_INET6 are allowed (any
// type and protocol: a test's UDP and TCP servers), AF_NETLINK too, and
// AF_UNIX is refused as in the other Landlock modes (the file system is
// still the host's).
//
// Under bwrap (netns) the command has its own network namespace and sees
// only the file system the sandbox binds (no host socket is in it): unix,
// netlink and IP sockets are allowed, every other family (AF_VSOCK to the
// hypervisor, AF_PACKET, AF_ALG, …) is refused.
func seccompFilter(mode string) ([]unix.SockFilter, error) {
	arch, ok := seccompArch()
	if !ok {
		return nil, fmt.Errorf("seccomp: unsupported architecture %s", runtime.GOARCH)
	}
	if mode != SeccompNoInet && mode != SeccompTCPOnly && mode != SeccompNetns && mode != SeccompPrivateNet {
		return nil, fmt.Errorf("seccomp: unknown mode %q", mode)
	}
	const (
		ldW   = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		and   = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
		ret   = unix.BPF_RET | unix.BPF_K
		allow = unix.SECCOMP_RET_ALLOW
		deny  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		kill  = unix.SECCOMP_RET_KILL_PROCESS
		// offsets in struct seccomp_data (little endian: the low half of
		// a 64-bit argument comes first)
		offNr   = 0
		offArch = 4
		offArg0 = 16
		offArg1 = 24
		offArg2 = 32
	)
	// A tiny assembler: jumps name labels, resolved below.
	type ins struct {
		code   uint16
		k      uint32
		jt, jf string // labels ("" = next instruction)
		label  string
	}
	p := []ins{
		{code: ldW, k: offArch},
		{code: jeq, k: arch, jf: "kill"},
		{code: ldW, k: offNr},
	}
	if runtime.GOARCH == "amd64" {
		p = append(p, ins{code: jge, k: 0x40000000, jt: "deny"}) // x32 ABI
	}
	p = append(p,
		ins{code: jeq, k: uint32(unix.SYS_IO_URING_SETUP), jt: "deny"},
		ins{code: jeq, k: uint32(unix.SYS_IO_URING_ENTER), jt: "deny"},
		ins{code: jeq, k: uint32(unix.SYS_IO_URING_REGISTER), jt: "deny"},
		ins{code: jeq, k: uint32(unix.SYS_SOCKET), jt: "socket", jf: "allow"},
		ins{label: "socket", code: ldW, k: offArg0},
	)
	switch mode {
	case SeccompNetns:
		p = append(p,
			ins{code: jeq, k: unix.AF_UNIX, jt: "allow"},
			ins{code: jeq, k: unix.AF_NETLINK, jt: "allow"},
			ins{code: jeq, k: unix.AF_INET, jt: "allow"},
			ins{code: jeq, k: unix.AF_INET6, jt: "allow", jf: "deny"},
		)
	case SeccompPrivateNet:
		p = append(p,
			ins{code: jeq, k: unix.AF_NETLINK, jt: "allow"},
			ins{code: jeq, k: unix.AF_INET, jt: "allow"},
			ins{code: jeq, k: unix.AF_INET6, jt: "allow", jf: "deny"},
		)
	default:
		p = append(p,
			ins{code: jeq, k: unix.AF_NETLINK, jt: "allow"},
			ins{code: jeq, k: unix.AF_INET, jt: "inet"},
			ins{code: jeq, k: unix.AF_INET6, jt: "inet", jf: "deny"},
		)
		if mode == SeccompNoInet {
			p = append(p, ins{label: "inet", code: ret, k: deny})
		} else {
			p = append(p,
				ins{label: "inet", code: ldW, k: offArg1},
				ins{code: and, k: 0xf}, // SOCK_TYPE_MASK: drop SOCK_NONBLOCK, SOCK_CLOEXEC
				ins{code: jeq, k: unix.SOCK_STREAM, jf: "deny"},
				ins{code: ldW, k: offArg2},
				ins{code: jeq, k: 0, jt: "allow"},
				ins{code: jeq, k: unix.IPPROTO_TCP, jt: "allow", jf: "deny"},
			)
		}
	}
	p = append(p,
		ins{label: "allow", code: ret, k: allow},
		ins{label: "deny", code: ret, k: deny},
		ins{label: "kill", code: ret, k: kill},
	)
	at := map[string]int{}
	for i, x := range p {
		if x.label != "" {
			at[x.label] = i
		}
	}
	out := make([]unix.SockFilter, len(p))
	for i, x := range p {
		f := unix.SockFilter{Code: x.code, K: x.k}
		if x.code&0x07 == unix.BPF_JMP {
			for _, j := range []struct {
				label string
				dst   *uint8
			}{{x.jt, &f.Jt}, {x.jf, &f.Jf}} {
				if j.label == "" {
					continue
				}
				to, ok := at[j.label]
				if !ok || to <= i || to-i-1 > 255 {
					return nil, fmt.Errorf("seccomp: bad jump to %q", j.label)
				}
				*j.dst = uint8(to - i - 1)
			}
		}
		out[i] = f
	}
	return out, nil
}

// installSeccomp installs the filter on every thread of this process
// (TSYNC); no_new_privs must already be set.
func installSeccomp(mode string) error {
	filter, err := seccompFilter(mode)
	if err != nil {
		return err
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog))); e != 0 {
		return fmt.Errorf("seccomp: %w", e)
	}
	runtime.KeepAlive(filter)
	return nil
}

// SeccompSupported reports whether the seccomp network filter exists for
// this architecture.
func SeccompSupported() bool { _, ok := seccompArch(); return ok }

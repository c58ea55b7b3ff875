//go:build linux

package launch

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// NetnsAttr is how the supervisor (or a benchmark's bare confine stage)
// starts the confine stage for a Netns mode: in a network namespace of
// its own, and for NetnsUser in a user namespace too, whose only mapping
// is this process's uid and gid to themselves (the command keeps its
// identity and file ownership looks as on the host; setgroups is denied,
// as an unprivileged mapping requires). An unprivileged process loses
// the capabilities it holds in a fresh user namespace when it execs, so
// the stage keeps CAP_NET_ADMIN (to bring lo up) and CAP_SETPCAP (to
// drop the rest) as ambient capabilities, and drops every one before the
// command runs. nil for NetnsNone.
func NetnsAttr(mode string) (*syscall.SysProcAttr, error) {
	switch mode {
	case NetnsNone:
		return nil, nil
	case NetnsNet:
		return &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}, nil
	case NetnsUser:
		uid, gid := os.Getuid(), os.Getgid()
		return &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}},
			AmbientCaps: []uintptr{unix.CAP_NET_ADMIN, unix.CAP_SETPCAP},
		}, nil
	}
	return nil, fmt.Errorf("launcher: unknown network namespace mode %q", mode)
}

// loopbackUp brings up lo of this process's network namespace, which
// must be a fresh one: there lo is down. A lo that is up already means
// the stage runs in a namespace it did not get for itself (the host's),
// where allowing IP sockets would open the host's loopback services, so
// that is an error.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: get flags: %w", err)
	}
	flags := ifr.Uint16()
	if flags&unix.IFF_UP != 0 {
		return errors.New("loopback: lo is up already, so this is not a fresh network namespace")
	}
	ifr.SetUint16(flags | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: bring lo up: %w", err)
	}
	return nil
}

// handOffListener listens on b.Listen in this (private) network
// namespace and sends the listener over the unix socket b.Handoff to the
// supervisor, which serves it from outside (the proxy bridge). Both
// descriptors are closed here: the command inherits neither.
func handOffListener(b Bridge) error {
	defer unix.Close(b.Handoff)
	ln, err := net.Listen("tcp", b.Listen)
	if err != nil {
		return fmt.Errorf("proxy bridge: %w", err)
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		return fmt.Errorf("proxy bridge: %w", err)
	}
	defer f.Close()
	if err := unix.Sendmsg(b.Handoff, []byte{0}, unix.UnixRights(int(f.Fd())), nil, 0); err != nil {
		return fmt.Errorf("proxy bridge: hand the listener over: %w", err)
	}
	return nil
}

// receiveListener receives the listener the confine stage sends over fd
// (handOffListener) and closes fd.
func receiveListener(fd int) (net.Listener, error) {
	defer unix.Close(fd)
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return nil, err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return nil, err
	}
	if len(msgs) != 1 {
		return nil, errors.New("no listener was handed over")
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil {
		return nil, err
	}
	if len(fds) != 1 {
		for _, d := range fds {
			unix.Close(d)
		}
		return nil, errors.New("no listener was handed over")
	}
	f := os.NewFile(uintptr(fds[0]), "bridge")
	defer f.Close()
	return net.FileListener(f)
}

package main

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/ax-sched/ax/cli"
)

// listenAPI binds the admin API's address before anything else of the
// server starts, so that a busy port stops ax server before it opens its
// store, takes a lease or dispatches anything, with a message that says
// what to do about it.
func listenAPI(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil
	}
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("--listen %s: address already in use: another program (another ax server?) serves it; stop that one, or choose another address with --listen (with make run: make run PORT=N): %w", addr, err)
	}
	return nil, fmt.Errorf("--listen %s: cannot listen there (use host:port, such as 127.0.0.1:8080): %w", addr, err)
}

// checkListen refuses a non-loopback listen address without the admin
// token (writes would need none), unless insecure says the operator means
// it. Executors always authenticate (executorToken).
func checkListen(addr, token string, insecure bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return cli.Usage("--listen %q: give host:port, such as 127.0.0.1:8080", addr)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	switch {
	case insecure:
	case token == "":
		return cli.Usage("--listen %s is not a loopback address: set AX_ADMIN_TOKEN so that writes need a bearer token, or pass --insecure to serve the API to the network without one", addr)
	}
	return nil
}

package main

import (
	"errors"
	"fmt"
	"net"
	"syscall"
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

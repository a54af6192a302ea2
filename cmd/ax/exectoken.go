package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// executorTokenFileName is the executor credential's file beside a SQLite
// store, when neither AX_EXECUTOR_TOKEN nor --executor-token-file names one.
const executorTokenFileName = "executor.token"

// defaultExecutorTokenFile is where the executor credential of a server on
// target lives by default: beside a SQLite store file. A store on a
// database server (MySQL, PostgreSQL) has no directory of its own: its
// servers (usually on several hosts) are given one credential,
// AX_EXECUTOR_TOKEN or --executor-token-file; "" then.
func defaultExecutorTokenFile(target string) string {
	if store.IsServer(target) {
		return ""
	}
	path := strings.TrimPrefix(target, "sqlite:")
	if path == "" {
		path = store.DefaultPath
	}
	return filepath.Join(filepath.Dir(path), executorTokenFileName)
}

// executorToken returns the credential executors authenticate with (and
// the server sends with every dispatch, kill and status query): env
// (AX_EXECUTOR_TOKEN) when set; else the contents of file, which is
// created on first start with a random token, readable by its owner only
// (0600). A file others can read, or an empty one, is refused; so is a
// credential equal to the admin token (an operator's token is never an
// executor's, nor the other way round).
func executorToken(env, file, admin, target string) (string, error) {
	tok := env
	if tok == "" {
		if file == "" {
			return "", cli.Usage("a store on a database server (MySQL, PostgreSQL) has no directory to keep the executor credential in: set AX_EXECUTOR_TOKEN, or give --executor-token-file PATH (created with a random token when missing), the same on every server of the store")
		}
		var err error
		if tok, err = readOrCreateToken(file); err != nil {
			return "", cli.Fail(err)
		}
	}
	if admin != "" && tok == admin {
		return "", cli.Usage("the executor credential equals AX_ADMIN_TOKEN: give executors a token of their own (AX_EXECUTOR_TOKEN, or unset it to use --executor-token-file)")
	}
	return tok, nil
}

// readOrCreateToken reads the token of file, creating it when missing: the
// token is written to a temporary file (0600) and linked into place, so that
// two servers starting at once on one store agree on one token and nobody
// reads a half-written one.
func readOrCreateToken(file string) (string, error) {
	tok, err := runner.ReadTokenFile(file)
	if !errors.Is(err, fs.ErrNotExist) {
		return tok, err
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	tmp, err := os.CreateTemp(filepath.Dir(file), ".executor-token-*")
	if err != nil {
		return "", fmt.Errorf("executor credential: create %s: %w (give --executor-token-file in a directory ax may write, or set AX_EXECUTOR_TOKEN)", file, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.WriteString(hex.EncodeToString(b) + "\n")
	if err = errors.Join(err, tmp.Chmod(0o600), tmp.Sync(), tmp.Close()); err != nil {
		return "", fmt.Errorf("executor credential: write %s: %w", tmp.Name(), err)
	}
	if err := os.Link(tmp.Name(), file); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("executor credential: create %s: %w", file, err)
	}
	return runner.ReadTokenFile(file) // ours, or the one another server linked first
}

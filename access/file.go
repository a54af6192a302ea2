package access

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"
)

// File is a users file the server reloads when it changes (polled, like
// the pipeline files) and on SIGHUP: a valid new content replaces the
// users at once (a removed user's sessions and token stop working); an
// invalid one is logged and the users in force stay. Safe for concurrent use.
type File struct {
	path  string
	known Known
	log   *slog.Logger

	mu    sync.Mutex
	users *Users
	sum   [32]byte
	err   error                           // the last reload's refusal, nil when it loaded
	leave func(name string, at time.Time) // told of each user a reload removed
}

// OnLeave has leave told of each user a reload removes, when it does (so
// that their sessions stay refused if they come back: Sessions.Left).
func (f *File) OnLeave(leave func(name string, at time.Time)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leave = leave
}

// Open loads the users file at path; the error says what is wrong in it.
func Open(path string, known Known, log *slog.Logger) (*File, error) {
	f := &File{path: path, known: known, log: log}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("users file: %w", err)
	}
	us, err := Parse(path, data, known)
	if err != nil {
		return nil, err
	}
	f.users, f.sum = us, sha256.Sum256(data)
	f.warnEmpty(us)
	return f, nil
}

// warnEmpty logs that a file names no user: nobody signs in with it.
func (f *File) warnEmpty(us *Users) {
	if len(us.order) == 0 {
		f.log.Warn("users_file_empty", "file", f.path, "hint", "nobody can sign in but with AX_ADMIN_TOKEN: add users with ax users add NAME --role ROLE --file "+f.path)
	}
}

// Refused is why the last reload kept the users in force (nil: it loaded).
func (f *File) Refused() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// Users returns the users in force.
func (f *File) Users() *Users {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.users
}

// Reload reads the file again: the users in force change only when it is
// valid. It returns the refusal, if any.
func (f *File) Reload() error {
	data, err := os.ReadFile(f.path)
	var us *Users
	if err == nil {
		us, err = Parse(f.path, data, f.known)
	} else {
		err = fmt.Errorf("users file: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sum, f.err = sha256.Sum256(data), err
	if err != nil {
		f.log.Error("users_reload_refused", "file", f.path, "error", err.Error())
		return err
	}
	if f.leave != nil {
		now := time.Now()
		for _, name := range f.users.order {
			if us.Lookup(name) == nil {
				f.leave(name, now)
			}
		}
	}
	f.users = us
	f.log.Info("users_reload", "file", f.path, "users", len(us.order))
	f.warnEmpty(us)
	return nil
}

// Watch reloads on hup, and on ticks when the file's content changed.
func (f *File) Watch(ctx context.Context, ticks <-chan time.Time, hup <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			_ = f.Reload()
		case <-ticks:
			data, _ := os.ReadFile(f.path)
			f.mu.Lock()
			changed := sha256.Sum256(data) != f.sum
			f.mu.Unlock()
			if changed {
				_ = f.Reload()
			}
		}
	}
}

// Add writes a new user to the users file at path (created when missing)
// with a fresh token, kept hashed; it returns the token, which is shown
// once and kept nowhere. A name already in the file is refused, and the
// file is left as it was. Adds at once take turns (a lock file beside the
// file, path.lock), each reading the file its predecessor wrote. A path
// that is a symbolic link is written through to its target, whose mode
// is kept (a new file is 0600).
func Add(path string, u User) (string, error) {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", fmt.Errorf("users file: lock: %w", err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("users file: lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing unlocks too
	mode := fs.FileMode(0o600)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("users file: %w", err)
	}
	if _, err := Parse(path, data, nil); err != nil {
		return "", fmt.Errorf("%w (fix the file first: nothing was added)", err)
	}
	var doc fileDoc
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return "", fmt.Errorf("%s: %v", path, err)
	}
	if slices.ContainsFunc(doc.Users, func(e fileEntry) bool { return e.Name == u.Name }) {
		return "", fmt.Errorf("%s: user %q is there already: remove its entry first to give it a new token", path, u.Name)
	}
	token := NewToken()
	doc.Users = append(doc.Users, fileEntry{Name: u.Name, Role: u.Role.String(), Groups: u.Groups, Pipelines: u.Pipelines, ActFor: u.ActFor, Token: HashToken(token)})
	out, err := yaml.Marshal(doc)
	if err != nil {
		return "", err
	}
	if _, err := Parse(path, out, nil); err != nil { // the entry itself is checked like the file
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".users-*")
	if err != nil {
		return "", fmt.Errorf("users file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(out); err != nil {
		tmp.Close()
		return "", fmt.Errorf("users file: %w", err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return "", fmt.Errorf("users file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("users file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("users file: %w", err)
	}
	return token, nil
}

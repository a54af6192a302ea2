package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/ax-sched/ax/defs"
)

// SecretProvider looks secrets up by name. A Vault-like store is one more
// implementation, registered under its provider name in [Secrets].
type SecretProvider interface {
	// Secret returns the value of the secret called name, or an error
	// wrapping ErrNoSecret when there is none. The error never holds a
	// secret's value.
	Secret(ctx context.Context, name string) (string, error)
}

// ErrNoSecret is what the error of a secret that cannot be found is (errors.Is).
var ErrNoSecret = errors.New("runner: no such secret")

// missing is the error of a secret that cannot be found: why, and what to do.
type missing string

func missingf(format string, args ...any) error { return missing(fmt.Sprintf(format, args...)) }

func (m missing) Error() string        { return string(m) }
func (m missing) Is(target error) bool { return target == ErrNoSecret }

// Secrets are the providers a server resolves references with, by the
// provider name a reference gives (defs.SecretFile, defs.SecretEnv).
type Secrets map[string]SecretProvider

// NewSecrets returns the stock providers: the files of dir (none when dir
// is "") and the process's own environment.
func NewSecrets(dir string) Secrets {
	s := Secrets{defs.SecretEnv: SecretEnv(os.LookupEnv)}
	if dir != "" {
		s[defs.SecretFile] = SecretDir(dir)
	}
	return s
}

// Resolve returns the value of the secret ref names. Its error names the
// secret and what to do, never a value.
func (s Secrets) Resolve(ctx context.Context, ref defs.SecretRef) (string, error) {
	p := s[ref.Provider]
	if p == nil {
		if ref.Provider == defs.SecretFile {
			return "", missingf("secret %s: no --secrets-dir was given: give the directory that holds the secrets' files", ref.Name)
		}
		return "", missingf("secret %s: no provider %q is configured here", ref, ref.Provider)
	}
	v, err := p.Secret(ctx, ref.Name)
	if err != nil {
		return "", fmt.Errorf("secret %s: %w", refLabel(ref), err)
	}
	return v, nil
}

// refLabel is a reference as a file writes it.
func refLabel(ref defs.SecretRef) string {
	if ref.Provider == defs.SecretFile {
		return ref.Name
	}
	return ref.String()
}

// Unresolved returns, for each of refs that cannot be resolved now, why:
// what a server warns of at start and reload.
func (s Secrets) Unresolved(ctx context.Context, refs []defs.SecretRef) []error {
	var out []error
	for _, r := range refs {
		if _, err := s.Resolve(ctx, r); err != nil {
			out = append(out, err)
		}
	}
	return out
}

// SecretDir is a directory of secrets, one file each, named after the
// secret: the value is the file's content without its trailing newline.
// A secret's file is a regular file (or a link to one, as mounted
// Kubernetes secrets are) of at most MaxSecret bytes, and not empty.
type SecretDir string

// MaxSecret caps the size of a secret's file: a value is given to a
// command in its environment, where the system allows little more.
const MaxSecret = 1 << 20

// Secret reads the file of the secret called name. A file that is not a
// regular one (a named pipe, a device) is refused without being opened
// for a blocking read, so that it never holds an attempt or a reload.
func (d SecretDir) Secret(_ context.Context, name string) (string, error) {
	if name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		return "", missingf("%q is not a file name", name)
	}
	path := filepath.Join(string(d), name)
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", missingf("no file %s: create it (one file per secret) or fix the reference", path)
	}
	if err != nil {
		return "", missingf("%s cannot be read: %v", path, pathless(err))
	}
	if err := secretFile(path, fi); err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", missingf("%s cannot be read: %v", path, pathless(err))
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return "", missingf("%s cannot be read: %v", path, pathless(err))
	}
	if err := secretFile(path, fi); err != nil {
		return "", err
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSecret+1))
	if err != nil {
		return "", missingf("%s cannot be read: %v", path, pathless(err))
	}
	if len(data) > MaxSecret {
		return "", missingf("%s is over %d bytes (1 MiB), more than a command's environment takes: give the task the path of a file instead", path, MaxSecret)
	}
	v := strings.TrimRight(string(data), "\r\n")
	if v == "" {
		return "", missingf("%s is empty: write the secret's value into it", path)
	}
	return v, nil
}

// secretFile refuses the file path of fi as a secret's unless it is a
// regular file within MaxSecret.
func secretFile(path string, fi os.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return missingf("%s is %s, not a regular file: write the secret's value into a plain file", path, fileKind(fi.Mode()))
	}
	if fi.Size() > MaxSecret {
		return missingf("%s is %d bytes, over %d (1 MiB), more than a command's environment takes: give the task the path of a file instead", path, fi.Size(), MaxSecret)
	}
	return nil
}

// pathless is the reason of a file error without the path it repeats.
func pathless(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// SecretEnv looks secrets up in an environment (os.LookupEnv: the
// server's own).
type SecretEnv func(string) (string, bool)

// Secret returns the variable called name.
func (e SecretEnv) Secret(_ context.Context, name string) (string, error) {
	v, ok := e(name)
	if !ok {
		return "", missingf("the server's environment has no %s: set it where the server starts", name)
	}
	return v, nil
}

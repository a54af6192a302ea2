package runner

import (
	"fmt"
	"os"
	"strings"
)

// ReadTokenFile reads the executor credential of file (ax server's
// --executor-token-file, by default executor.token beside its SQLite
// store): one line, readable and writable by its owner only. A file others
// may read or write, or one that holds no token, is an error that says
// what to do. The server and the executor SDK read it with this one rule.
func ReadTokenFile(file string) (string, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return "", fmt.Errorf("executor credential: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("executor credential %s is not a regular file: give a file, or set AX_EXECUTOR_TOKEN", file)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("executor credential %s has mode %v: others may read it; run chmod 600 %s", file, perm, file)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("executor credential: %w", err)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("executor credential %s holds no token (one line, no spaces): remove it to have ax server make a new one, or write one", file)
	}
	return tok, nil
}

package cli

import (
	"os"

	"github.com/ax-sched/ax/runner"
)

// OpenSecrets returns the secret providers of a command that runs tasks,
// given its --secrets-dir dir ("": none): a dir given must be a directory.
func OpenSecrets(dir string) (runner.Secrets, error) {
	if dir != "" {
		fi, err := os.Stat(dir)
		if err != nil || !fi.IsDir() {
			return nil, Usage("--secrets-dir %s: no such directory: give the directory that holds one file per secret", dir)
		}
	}
	return runner.NewSecrets(dir), nil
}

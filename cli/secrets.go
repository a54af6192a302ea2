package cli

import (
	"os"

	"github.com/ax-sched/ax/runner"
	"github.com/spf13/pflag"
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

// addSecretsFlag adds --secrets-dir, the one flag of every command that
// runs tasks (ax server, ax run, ax backfill --standalone).
func AddSecretsFlag(fl *pflag.FlagSet, dir *string) {
	fl.StringVar(dir, "secrets-dir", "", "directory of the secrets that tasks' env may take with {secret: NAME}: one file per secret, named after it (as mounted Kubernetes secrets or systemd credentials); {secret: env:NAME} reads this process's environment")
}

// checkSecretsDir refuses a backfill whose --secrets-dir is not a
// directory before anything is stored: its standalone engine could not
// start. Without --standalone the server's own secrets serve.
func checkSecretsDir(f BackfillOptions) error {
	if f.SecretsDir != "" && !f.Standalone {
		return Usage("--secrets-dir is for the engine of --standalone: without it, the server's own --secrets-dir serves")
	}
	_, err := OpenSecrets(f.SecretsDir)
	return err
}

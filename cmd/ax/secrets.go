package main

import (
	"github.com/spf13/pflag"

	"github.com/ax-sched/ax/cli"
)

// addSecretsFlag adds --secrets-dir, the one flag of every command that
// runs tasks (ax server, ax run, ax backfill --standalone).
func addSecretsFlag(fl *pflag.FlagSet, dir *string) {
	fl.StringVar(dir, "secrets-dir", "", "directory of the secrets that tasks' env may take with {secret: NAME}: one file per secret, named after it (as mounted Kubernetes secrets or systemd credentials); {secret: env:NAME} reads this process's environment")
}

// checkSecretsDir refuses a backfill whose --secrets-dir is not a
// directory before anything is stored: its standalone engine could not
// start. Without --standalone the server's own secrets serve.
func checkSecretsDir(f cli.BackfillOptions) error {
	if f.SecretsDir != "" && !f.Standalone {
		return cli.Usage("--secrets-dir is for the engine of --standalone: without it, the server's own --secrets-dir serves")
	}
	_, err := cli.OpenSecrets(f.SecretsDir)
	return err
}

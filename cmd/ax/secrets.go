package main

import "github.com/spf13/pflag"

// addSecretsFlag adds --secrets-dir, the one flag of every command that
// runs tasks (ax server, ax run, ax backfill --standalone).
func addSecretsFlag(fl *pflag.FlagSet, dir *string) {
	fl.StringVar(dir, "secrets-dir", "", "directory of the secrets that tasks' env may take with {secret: NAME}: one file per secret, named after it (as mounted Kubernetes secrets or systemd credentials); {secret: env:NAME} reads this process's environment")
}

package main

import (
	"os"
	"os/exec"
	"testing"
)

// TestPythonSDKRobust runs the Python SDK's own unit tests
// (sdk/python/tests): a handler that exits, blocks or is a coroutine, a
// callback that is not http(s), a poisoned or torn journal, a lock file
// deleted under a running executor, a bad request body, and a drain at
// SIGTERM. Without python3 it skips, and in CI (CI set) that is a failure.
func TestPythonSDKRobust(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("python3 is not installed: the Python SDK's tests cannot run, and in CI that is a failure (install python3 >= 3.9)")
		}
		t.Skip("python3 is not installed (in CI that fails)")
	}
	cmd := exec.Command(py, "-m", "unittest", "discover", "-s", "../../sdk/python/tests", "-t", "../../sdk/python/tests")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python3 -m unittest discover -s sdk/python/tests: %v\n%s", err, out)
	}
}

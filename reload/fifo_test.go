package reload

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// The watcher's fingerprint reads files as ax validate does: a named pipe
// named *.yaml beside the pipelines is fingerprinted as unreadable at once,
// not waited on for a writer (which stopped the watcher for good).
func TestFilesSumDoesNotWaitOnAPipe(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("pipeline: a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "p.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() { done <- FilesSum([]string{dir}) }()
	select {
	case sum := <-done:
		if sum == "" {
			t.Error("empty fingerprint")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("FilesSum still waits on the named pipe after 10 s")
	}
}

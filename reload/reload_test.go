package reload

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// watchedA is a valid pipeline file.
const watchedA = "pipeline: a\ntimezone: UTC\nschedule: \"@every 1s\"\ntasks:\n  - {name: x, function: noop}\n"

// TestWatcherSeesUnreadableFile: a file the watcher cannot read (here a
// dangling symlink) appearing among the pipeline files is a change like any
// other: the reload is refused naming the file, and the running set stays.
// Before, the watcher's fingerprint failed as a whole while such a file was
// there, so it silently stopped seeing every change to the other files.
func TestWatcherSeesUnreadableFile(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), watchedA)
	synctest.Test(t, func(t *testing.T) {
		rl := New([]string{dir}, FilesSum([]string{dir}), 0, nil, slog.New(slog.DiscardHandler))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		tick := time.NewTicker(time.Second) // what run gives watch, in the bubble's time
		defer tick.Stop()
		go rl.Watch(ctx, tick.C, make(chan os.Signal))
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if l := rl.Last(); l != nil {
			t.Fatalf("reloaded with nothing changed: %+v", l)
		}
		dangling := filepath.Join(dir, "dangling.yaml")
		if err := os.Symlink(filepath.Join(dir, "nowhere"), dangling); err != nil {
			t.Fatal(err)
		}
		// An edit of another file meanwhile must not go unnoticed either.
		writeFile(t, filepath.Join(dir, "a.yaml"), strings.Replace(watchedA, "@every 1s", "@every 2s", 1))
		time.Sleep(3 * time.Second)
		synctest.Wait()
		l := rl.Last()
		if l == nil {
			t.Fatal("the watcher saw no change while an unreadable file was among the pipelines")
		}
		if l.OK || len(l.Errors) != 1 || !strings.Contains(l.Errors[0], dangling) {
			t.Fatalf("reload with a dangling symlink: ok=%v errors=%q; want it refused naming %s", l.OK, l.Errors, dangling)
		}
		cancel()
		synctest.Wait()
	})
}

func writeFile(t *testing.T, path, src string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Package reload watches the pipeline files of ax server and hands a
// changed set to the engine, validated as a whole. It lives apart from the
// command so that the API (which reports the last reload) and the server's
// wiring share one watcher.
package reload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
)

// Watcher watches the --pipelines files of ax server and hands a changed
// set to the engine, validated as a whole: one broken file keeps the whole
// running set, and its ax validate messages are logged and kept for the
// API and the console. It polls the files' contents (editors that write a
// temporary file and rename it are seen like any other), and SIGHUP asks
// for a reload at once.
type Watcher struct {
	paths []string
	rate  float64 // --dispatch-rate, for the same warnings as ax validate
	eng   *engine.Engine
	log   *slog.Logger
	now   func() time.Time
	// Loaded, when set, is given each valid set of pipelines a reload
	// loads, before the engine takes it (the server warns there of the
	// secrets it cannot resolve).
	Loaded func(*dag.Graph)

	mu     sync.Mutex
	last   *Status    // nil before the first reload
	handed *dag.Graph // the set the last reload handed to the engine
	sum    string     // fingerprint of the files last loaded
}

// Status is the outcome of the last reload, for GET /api/v1/reload.
type Status struct {
	At      time.Time   `json:"at"`
	Cause   string      `json:"cause"` // "files changed" or "SIGHUP"
	OK      bool        `json:"ok"`
	Diff    engine.Diff `json:"diff"`
	Summary string      `json:"summary"`
	Errors  []string    `json:"errors,omitempty"` // file:line:col messages, as ax validate prints them
}

// New watches paths for eng, whose pipelines were loaded from
// files whose fingerprint (FilesSum) was sum, taken before they were read:
// a file that changes while the server starts is reloaded.
func New(paths []string, sum string, rate float64, eng *engine.Engine, log *slog.Logger) *Watcher {
	return &Watcher{paths: paths, sum: sum, rate: rate, eng: eng, log: log, now: time.Now}
}

// Last returns the last reload's outcome, or nil. A set the engine took
// but the store then refused for good (engine.ReloadFailure) is reported
// as failed: not OK, with the store's error; the running set stayed.
func (r *Watcher) Last() *Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil || !r.last.OK || r.handed == nil {
		return r.last
	}
	err := r.eng.ReloadFailure(r.handed)
	if err == nil {
		return r.last
	}
	st := *r.last
	st.OK, st.Errors = false, []string{err.Error()}
	st.Summary = "not applied, the store refused it: the running pipelines stay as they are"
	return &st
}

// Reload loads and validates the files and, when they are valid, hands
// them to the engine.
func (r *Watcher) Reload(cause string) Status {
	sum := FilesSum(r.paths)
	st := Status{At: r.now().UTC(), Cause: cause}
	var handed *dag.Graph
	g, errs, err := dag.Load(r.paths, defs.Options{}, dag.Options{DispatchRate: WarnRate(r.rate)})
	switch {
	case err != nil:
		st.Errors = []string{err.Error()}
	case g == nil:
		for _, e := range errs.Fatal() {
			st.Errors = append(st.Errors, e.Error())
		}
	default:
		for _, w := range errs.Warnings() {
			r.log.Warn("pipeline_warning", "at", w.Pos.String(), "task", w.Task, "message", w.Msg)
		}
		if r.Loaded != nil {
			r.Loaded(g)
		}
		d, err := r.eng.Reload(g)
		if err != nil {
			st.Errors = []string{err.Error()}
			break
		}
		st.OK, st.Diff, handed = true, d, g
	}
	if st.OK {
		st.Summary = st.Diff.String()
		r.log.Info("reload", "cause", cause, "diff", st.Summary)
	} else {
		st.Summary = "invalid: the running pipelines stay as they are"
		for _, e := range st.Errors {
			r.log.Error("reload_refused", "cause", cause, "error", e)
		}
	}
	r.mu.Lock()
	r.last, r.sum, r.handed = &st, sum, handed
	r.mu.Unlock()
	return st
}

// Run polls the files every interval and reloads once a change has been
// stable for one interval (a file half written is not read twice alike);
// SIGHUP reloads at once. It returns when ctx ends.
func (r *Watcher) Run(ctx context.Context, interval time.Duration) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	var ticks <-chan time.Time // nil: SIGHUP only
	if interval > 0 {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		ticks = tick.C
	}
	r.Watch(ctx, ticks, hup)
}

// Watch reloads on hup, and on ticks when the files' fingerprint changed
// and stayed the same since the previous tick.
func (r *Watcher) Watch(ctx context.Context, ticks <-chan time.Time, hup <-chan os.Signal) {
	seen := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			r.Reload("SIGHUP")
		case <-ticks:
			sum := FilesSum(r.paths)
			r.mu.Lock()
			loaded := r.sum
			r.mu.Unlock()
			if sum != loaded && sum == seen {
				r.Reload("files changed")
			}
			seen = sum
		}
	}
}

// FilesSum fingerprints the pipeline files under paths (the *.yaml and
// *.yml files ax validate reads): their names and contents. A path or file
// that cannot be read (a dangling symlink, a directory gone, no permission)
// is fingerprinted by its name and the error, not skipped and not an error
// of the whole: its appearance is a change like any other, so the watcher
// reloads, the load names the file and the running set stays — instead of
// the watcher going blind to every other file while it is there. A path
// renamed away for a moment is not reloaded: a change must stay the same
// for one interval.
func FilesSum(paths []string) string {
	h := sha256.New()
	unreadable := func(path string, err error) {
		io.WriteString(h, path+"\x00unreadable: "+err.Error()+"\x00")
	}
	var files []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			unreadable(p, err)
			continue
		}
		if !info.IsDir() {
			files = append(files, p)
			continue
		}
		filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				unreadable(path, err)
				return nil // the rest of the tree is still fingerprinted
			}
			if !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
				files = append(files, path)
			}
			return nil
		})
	}
	slices.Sort(files)
	for _, f := range files {
		data, err := defs.ReadFile(f) // a named pipe or a device is not waited on nor read without end
		if err != nil {
			unreadable(f, err)
			continue
		}
		io.WriteString(h, f+"\x00")
		h.Write(data)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// WarnRate is the dispatch rate that validation warns against (tasks whose
// fires could exceed it): --dispatch-rate, where 0 (unlimited) warns of
// nothing.
func WarnRate(rate float64) int {
	if rate <= 0 {
		return -1 // unlimited: no collision can exceed it
	}
	return max(1, int(rate))
}

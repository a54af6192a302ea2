package executor

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/ax-sched/ax/runner"
)

// The ticket journal (Config.StateDir) makes the ticket cache survive a
// restart of the executor process. Each ticket's life is appended to it,
// and synced to disk before the scheduler can act on it:
//
//   - accepted: before the dispatch is answered (with the dispatch);
//   - started: before the work starts;
//   - done: with the report, before the report is delivered;
//   - acked: when a scheduler acknowledged the report (not synced: at worst
//     a restart delivers an acknowledged report again, which the scheduler
//     records as stale and ignores).
//
// On opening, a ticket that was accepted and never started is queued again
// (it never ran); one that started and never finished is done with an
// interrupted failure (the work may have taken effect in part: the
// scheduler retries it per its policy, it is never run again silently); one
// done and not acknowledged is delivered again. The file is rewritten with
// only the live tickets when it opens and whenever it has grown to several
// times their number.
const (
	journalFile = "tickets.jsonl"
	bootFile    = "boot"
	lockFile    = "lock"
)

// Journal states of a ticket.
const (
	jAccepted = "accepted"
	jStarted  = "started"
	jDone     = "done"
	jAcked    = "acked"
)

// jentry is one line of the journal.
type jentry struct {
	Ticket   string         `json:"t"`
	State    string         `json:"s"`
	Dispatch *Dispatch      `json:"d,omitempty"` // accepted
	Expires  time.Time      `json:"x,omitzero"`  // accepted
	Report   *runner.Report `json:"r,omitempty"` // done
}

// journal is the open state dir. Its mutex also guards every job's jstate,
// so that a rewrite sees each ticket as its last line says.
type journal struct {
	mu      sync.Mutex
	dir     string
	f       *os.File
	lock    *os.File
	dirLock *os.File // the state dir itself, locked too: its lock file can be deleted under us
	appends int      // lines since the last rewrite
	// problems are the lines read at open that could not be taken
	// ("tickets.jsonl:3: …"), for the executor to log.
	problems []string
}

// jticket is a ticket as the journal left it.
type jticket struct {
	d       Dispatch
	expires time.Time
	state   string
	report  *runner.Report
}

// openJournal locks dir for this process, reads the tickets and the boot id
// it holds (creating a boot id on first use), and rewrites the journal with
// the tickets not expired at now.
func openJournal(dir string, now time.Time) (*journal, []*jticket, string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, "", fmt.Errorf("executor: state dir: %w", err)
	}
	// Both the directory and its lock file are locked, each on a descriptor
	// held open while the executor lives: a lock file deleted and made anew
	// lets a second process lock the new one, a directory cannot be.
	dirLock, err := os.Open(dir)
	if err != nil {
		return nil, nil, "", fmt.Errorf("executor: state dir: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		dirLock.Close()
		return nil, nil, "", fmt.Errorf("executor: state dir: %w", err)
	}
	unlock := func() { lock.Close(); dirLock.Close() }
	for _, f := range []*os.File{dirLock, lock} {
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			unlock()
			return nil, nil, "", fmt.Errorf("executor: state dir %s is in use by another executor process (%v): give each executor its own", dir, err)
		}
	}
	fail := func(err error) (*journal, []*jticket, string, error) {
		unlock()
		return nil, nil, "", fmt.Errorf("executor: state dir %s: %w", dir, err)
	}
	boot := ""
	switch b, err := os.ReadFile(filepath.Join(dir, bootFile)); {
	case err == nil && len(bytes.TrimSpace(b)) > 0:
		boot = string(bytes.TrimSpace(b))
	case err == nil || errors.Is(err, os.ErrNotExist):
		boot = newBoot()
		if err := writeSynced(dir, bootFile, []byte(boot+"\n")); err != nil {
			return fail(err)
		}
	default:
		return fail(err)
	}
	tickets, problems, err := readJournal(filepath.Join(dir, journalFile), now)
	if err != nil {
		return fail(err)
	}
	var live []*jticket
	for _, t := range tickets {
		if t.state == jAcked || t.state == jDone {
			if now.After(t.expires) {
				continue
			}
		}
		live = append(live, t)
	}
	j := &journal{dir: dir, lock: lock, dirLock: dirLock, problems: problems}
	if err := j.rewrite(jentries(live)); err != nil {
		return fail(err)
	}
	return j, live, boot, nil
}

// readJournal reads the tickets of a journal file, in the order they were
// accepted. A line that does not parse is skipped and named in problems (a
// torn last line is what a process killed inside a write leaves). A ticket
// whose accepted line was lost but that has a later line is known all the
// same, as started: it is reported interrupted and never runs again.
func readJournal(path string, now time.Time) (tickets []*jticket, problems []string, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	byTicket := map[string]*jticket{}
	var order []*jticket
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4*maxDispatch)
	for n := 1; sc.Scan(); n++ {
		var e jentry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			problems = append(problems, fmt.Sprintf("%s:%d: %v: skipped", path, n, err))
			continue
		}
		if e.Ticket == "" {
			continue
		}
		t := byTicket[e.Ticket]
		switch {
		case e.State == jAccepted && e.Dispatch != nil:
			if t == nil {
				t = &jticket{}
				byTicket[e.Ticket] = t
				order = append(order, t)
			}
			t.d, t.expires, t.state = *e.Dispatch, e.Expires, jAccepted
			continue
		case t == nil:
			problems = append(problems, fmt.Sprintf("%s:%d: ticket %s has no readable accepted line: known as started (reported interrupted, never run again)", path, n, e.Ticket))
			t = &jticket{d: Dispatch{Version: runner.ProtocolVersion, Ticket: e.Ticket}, expires: now.Add(DefaultTicketTTL), state: jStarted}
			byTicket[e.Ticket] = t
			order = append(order, t)
		}
		switch {
		case e.State == jStarted && t.state == jAccepted:
			t.state = jStarted
		case e.State == jDone && e.Report != nil:
			t.state, t.report = jDone, e.Report
		case e.State == jAcked && t.state == jDone:
			t.state = jAcked
		}
	}
	return order, problems, sc.Err()
}

// jentries are the lines that record tickets as they are.
func jentries(ts []*jticket) []jentry {
	var out []jentry
	for _, t := range ts {
		d := t.d
		out = append(out, jentry{Ticket: d.Ticket, State: jAccepted, Dispatch: &d, Expires: t.expires})
		switch t.state {
		case jStarted:
			out = append(out, jentry{Ticket: d.Ticket, State: jStarted})
		case jDone, jAcked:
			out = append(out, jentry{Ticket: d.Ticket, State: jDone, Report: t.report})
			if t.state == jAcked {
				out = append(out, jentry{Ticket: d.Ticket, State: jAcked})
			}
		}
	}
	return out
}

// rewrite replaces the journal file with lines, atomically and durably, and
// appends to the new file from then on. Called with mu held (or before the
// journal is shared).
func (j *journal) rewrite(lines []jentry) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, e := range lines {
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	if err := writeSynced(j.dir, journalFile, buf.Bytes()); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(j.dir, journalFile), os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if j.f != nil {
		j.f.Close()
	}
	j.f, j.appends = f, 0
	return nil
}

// writeSynced writes name in dir through a synced temporary file renamed
// over it, and syncs dir: after a crash the file is either old or new.
func writeSynced(dir, name string, data []byte) error {
	tmp, err := os.CreateTemp(dir, name+".*.tmp")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	err = errors.Join(err, tmp.Sync(), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// append writes e (synced to disk when sync) and then, still under the
// journal's lock, sets the job's journal state: a rewrite never misses a
// line appended to the file it replaces.
func (j *journal) append(e jentry, sync bool, jb *job) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return errors.New("the ticket journal is closed")
	}
	if _, err := j.f.Write(append(b, '\n')); err != nil {
		return err
	}
	if sync {
		if err := j.f.Sync(); err != nil {
			return err
		}
	}
	j.appends++
	if jb != nil {
		jb.jstate = e.State
	}
	return nil
}

// compact rewrites the journal with the jobs still remembered once it has
// grown to several times their number.
func (j *journal) compact(jobs map[string]*job) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil || j.appends < 4*len(jobs)+1024 {
		return nil
	}
	ts := make([]*jticket, 0, len(jobs))
	for _, jb := range jobs {
		if jb.jstate == "" {
			continue // its accepted line is not written yet
		}
		t := &jticket{d: jb.d, expires: jb.expires, state: jb.jstate}
		if jb.jstate == jDone || jb.jstate == jAcked {
			rep := jb.report
			t.report = &rep
		}
		ts = append(ts, t)
	}
	return j.rewrite(jentries(ts))
}

// close closes the journal and releases the state dir.
func (j *journal) close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	var err error
	if j.f != nil {
		err = j.f.Close()
		j.f = nil
	}
	if j.lock != nil {
		err = errors.Join(err, j.lock.Close(), j.dirLock.Close())
		j.lock, j.dirLock = nil, nil
	}
	return err
}

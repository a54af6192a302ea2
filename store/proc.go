package store

import (
	"context"
	"database/sql"
	"time"

	sq "github.com/Masterminds/squirrel"
)

// ProcRecord is where an attempt runs, by its ticket: the host, its boot
// id and PID namespace, a process id (by Kind) and that process's start
// time (clock ticks since boot). A primary that inherits the attempt in
// RUNNING reads it to tell what became of it.
//
// Kind says what the row records:
//   - ProcGroup: the process group a command leads (Pgid) and its leader's
//     start time; written with the output of running attempts
//     (LogWrite.Procs), so it costs no transaction of its own.
//   - ProcServer: the scheduler process (its pid in Pgid) that handed a
//     local attempt out, written before the attempt starts: an in-process
//     function lives only as long as it, and a command started by it is
//     killed with it (Pdeathsig) until its group is recorded.
//   - ProcHeld: claimed ahead of its fire time by the scheduler process
//     recorded, under Epoch, written with the claim. Before held attempts
//     start, their hand-out is recorded for their fire time, one row per
//     epoch (Fence.HandOut): a held attempt whose fire time is past its
//     epoch's hand-out was handed out by that process; one whose fire time
//     is not never started.
type ProcRecord struct {
	Ticket     string
	InstanceID int64
	RunID      int64
	Host       string
	Boot       string
	PidNS      string
	Pgid       int
	Start      uint64
	At         time.Time
	Kind       string
	Epoch      int64 // the epoch that recorded it (ProcHeld: that claimed it); 0 before version 11
}

// Kinds of ProcRecord.
const (
	ProcGroup  = ""
	ProcServer = "server"
	ProcHeld   = "held"
)

var procCols = []string{"ticket", "instance_id", "run_id", "host", "boot", "pid_ns", "pgid", "start_ticks", "at", "kind", "epoch"}

// writeProcs upserts ps, many per statement.
func (s *Store) writeProcs(ctx context.Context, tx *sql.Tx, ps []ProcRecord) error {
	for start := 0; start < len(ps); start += 200 {
		b := s.sb.Insert("procs").Columns(procCols...)
		for _, p := range ps[start:min(start+200, len(ps))] {
			b = b.Values(p.Ticket, p.InstanceID, p.RunID, p.Host, p.Boot, p.PidNS, p.Pgid, int64(p.Start), p.At.UnixMilli(), nullStr(p.Kind), nullID(p.Epoch))
		}
		if _, err := s.exec(ctx, tx, "record command processes", b.Suffix(s.d.upsert([]string{"ticket"}, procCols[1:]))); err != nil {
			return err
		}
	}
	return nil
}

// Procs returns the recorded processes of tickets, by ticket; a ticket
// with none recorded is absent.
func (s *Store) Procs(ctx context.Context, tickets []string) (map[string]ProcRecord, error) {
	out := map[string]ProcRecord{}
	for start := 0; start < len(tickets); start += 500 {
		q := s.sb.Select(procCols...).From("procs").Where(sq.Eq{"ticket": tickets[start:min(start+500, len(tickets))]})
		err := s.query(ctx, s.read, "read command processes", q, func(rows *sql.Rows) error {
			var (
				p     ProcRecord
				ticks int64
				at    int64
				kind  sql.NullString
				epoch sql.NullInt64
			)
			if err := rows.Scan(&p.Ticket, &p.InstanceID, &p.RunID, &p.Host, &p.Boot, &p.PidNS, &p.Pgid, &ticks, &at, &kind, &epoch); err != nil {
				return err
			}
			p.Start, p.At, p.Kind, p.Epoch = uint64(ticks), time.UnixMilli(at).UTC(), kind.String, epoch.Int64
			out[p.Ticket] = p
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// HandOut records, before the attempts claimed ahead for fire time upto
// start, that the held attempts of each of epochs with a fire time up to
// upto were handed out: one row per epoch, whatever the number of
// attempts, so that opening a gate of 10,000 costs one small statement.
// The epochs are those that claimed the attempts (the fence's own, or an
// earlier one of this process before it took its lease again). Fire times
// only grow: attempts are claimed only for times still to come.
func (f *Fence) HandOut(ctx context.Context, epochs []int64, upto, now time.Time) error {
	if len(epochs) == 0 {
		return nil
	}
	return f.tx(ctx, "hand out claimed attempts", func(tx *sql.Tx) error {
		b := f.s.sb.Insert("handouts").Columns("epoch", "upto", "at")
		for _, e := range epochs {
			b = b.Values(e, upto.UnixMilli(), now.UnixMilli())
		}
		_, err := f.s.exec(ctx, tx, "record the hand-out", b.Suffix(f.s.d.upsert([]string{"epoch"}, []string{"upto", "at"})))
		return err
	})
}

// HandOuts returns, per epoch, the fire time up to which the attempts it
// claimed ahead were handed out (see HandOut).
func (s *Store) HandOuts(ctx context.Context) (map[int64]time.Time, error) {
	out := map[int64]time.Time{}
	err := s.query(ctx, s.read, "read hand-outs", s.sb.Select("epoch", "upto").From("handouts"), func(rows *sql.Rows) error {
		var epoch, upto int64
		if err := rows.Scan(&epoch, &upto); err != nil {
			return err
		}
		out[epoch] = time.UnixMilli(upto).UTC()
		return nil
	})
	return out, err
}

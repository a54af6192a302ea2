package store

import (
	"context"
	"database/sql"
	"time"

	sq "github.com/Masterminds/squirrel"
)

// ProcRecord is where a command attempt runs, by its ticket: the host, its
// boot id and PID namespace, the process group the command leads and the
// leader's start time (clock ticks since boot). The primary writes it with
// the output of running attempts (LogWrite.Procs), so it costs no
// transaction of its own; a primary that inherits the attempt in RUNNING
// reads it to check, on the same host, whether the group still runs.
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
}

var procCols = []string{"ticket", "instance_id", "run_id", "host", "boot", "pid_ns", "pgid", "start_ticks", "at"}

// writeProcs upserts ps, many per statement.
func (s *Store) writeProcs(ctx context.Context, tx *sql.Tx, ps []ProcRecord) error {
	for start := 0; start < len(ps); start += 200 {
		b := s.sb.Insert("procs").Columns(procCols...)
		for _, p := range ps[start:min(start+200, len(ps))] {
			b = b.Values(p.Ticket, p.InstanceID, p.RunID, p.Host, p.Boot, p.PidNS, p.Pgid, int64(p.Start), p.At.UnixMilli())
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
			)
			if err := rows.Scan(&p.Ticket, &p.InstanceID, &p.RunID, &p.Host, &p.Boot, &p.PidNS, &p.Pgid, &ticks, &at); err != nil {
				return err
			}
			p.Start, p.At = uint64(ticks), time.UnixMilli(at).UTC()
			out[p.Ticket] = p
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

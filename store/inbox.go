package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	sq "github.com/Masterminds/squirrel"
)

// InboxEntry is an executor's result as received by any server: stored
// by ticket before the executor is answered, applied later by the primary.
type InboxEntry struct {
	Ticket     string    `json:"ticket"`
	InstanceID int64     `json:"instance_id"`
	Report     string    `json:"report"`      // the report as JSON, as the executor sent it
	ReceivedBy string    `json:"received_by"` // the server that stored it
	ReceivedAt time.Time `json:"received_at"`
	AppliedAt  time.Time `json:"applied_at,omitzero"`
	Outcome    string    `json:"outcome,omitempty"` // applied, stale
}

// ReceiveResult stores a result in the inbox, durably, before it is
// acknowledged. It is written by any server, primary or standby, so it is
// not fenced. A ticket stored already is left as it is and reported with
// duplicate set: executors deliver at least once.
func (s *Store) ReceiveResult(ctx context.Context, e InboxEntry) (duplicate bool, err error) {
	if e.Ticket == "" {
		return false, errors.New("store: receive result: empty ticket")
	}
	err = s.inTx(ctx, "receive result", func(tx *sql.Tx) error {
		b := s.sb.Insert("inbox").Options(s.d.insertIgnore()[len("INSERT "):]).
			Columns("ticket", "instance_id", "report", "received_by", "received_at").
			Values(e.Ticket, e.InstanceID, e.Report, e.ReceivedBy, e.ReceivedAt.UnixMilli())
		n, err := s.exec(ctx, tx, "receive result", b)
		duplicate = n == 0
		return err
	})
	return duplicate, err
}

// PendingResults returns up to limit inbox entries not applied yet, oldest first.
func (s *Store) PendingResults(ctx context.Context, limit int) ([]InboxEntry, error) {
	return s.inbox(ctx, s.sb.Select(inboxCols...).From("inbox").Where(sq.Eq{"applied_at": nil}).OrderBy("received_at", "ticket").Limit(uint64(max(limit, 1))))
}

// InboxEntryOf returns the inbox entry of ticket, or ErrNotFound.
func (s *Store) InboxEntryOf(ctx context.Context, ticket string) (InboxEntry, error) {
	es, err := s.inbox(ctx, s.sb.Select(inboxCols...).From("inbox").Where(sq.Eq{"ticket": ticket}))
	if err != nil {
		return InboxEntry{}, err
	}
	if len(es) == 0 {
		return InboxEntry{}, notFound("inbox entry", ticket)
	}
	return es[0], nil
}

var inboxCols = []string{"ticket", "instance_id", "report", "received_by", "received_at", "applied_at", "outcome"}

func (s *Store) inbox(ctx context.Context, b sq.SelectBuilder) ([]InboxEntry, error) {
	var out []InboxEntry
	err := s.query(ctx, s.read, "read inbox", b, func(rows *sql.Rows) error {
		var (
			e       InboxEntry
			rcv     int64
			applied sql.NullInt64
			outcome sql.NullString
		)
		if err := rows.Scan(&e.Ticket, &e.InstanceID, &e.Report, &e.ReceivedBy, &rcv, &applied, &outcome); err != nil {
			return err
		}
		e.ReceivedAt, e.AppliedAt, e.Outcome = time.UnixMilli(rcv).UTC(), fromMS(applied), outcome.String
		out = append(out, e)
		return nil
	})
	return out, err
}

// markApplied closes inbox entries: outcome says what became of each (applied,
// stale). Called only through a Fence.
func (s *Store) markApplied(ctx context.Context, tx *sql.Tx, outcomes map[string]string, epoch int64, now time.Time) error {
	for ticket, outcome := range outcomes {
		u := s.sb.Update("inbox").Set("applied_at", now.UnixMilli()).Set("applied_epoch", epoch).Set("outcome", outcome).
			Where(sq.Eq{"ticket": ticket, "applied_at": nil})
		if _, err := s.exec(ctx, tx, fmt.Sprintf("mark result %s %s", ticket, outcome), u); err != nil {
			return err
		}
	}
	return nil
}

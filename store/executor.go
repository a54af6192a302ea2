package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	sq "github.com/Masterminds/squirrel"
)

// Executor is a registered executor.
type Executor struct {
	Address       string    `json:"address"`
	Protocol      string    `json:"protocol"`
	Tasks         []string  `json:"tasks"`
	RegisteredAt  time.Time `json:"registered_at"`
	LastHeartbeat time.Time `json:"last_heartbeat"`
	// Boot identifies the executor's process: a new one at a registration
	// means it restarted, and the work it ran before is gone.
	Boot string `json:"boot,omitempty"`
}

// RegisterParams registers an executor and the tasks it serves.
type RegisterParams struct {
	Address  string
	Protocol string
	Tasks    []string
	Boot     string // the executor process's boot id; empty when it sends none
	Now      time.Time
}

// RegisterExecutor records an executor and the tasks it serves, idempotently
// on (task, address): a restart on the same address updates its row rather
// than adding a ghost. Tasks it no longer lists are dropped from it. The
// registration counts as a heartbeat.
func (s *Store) RegisterExecutor(ctx context.Context, p RegisterParams) error {
	if p.Address == "" {
		return fmt.Errorf("store: register executor: empty address")
	}
	return s.inTx(ctx, "register executor", func(tx *sql.Tx) error {
		now := p.Now.UnixMilli()
		up := s.sb.Insert("executors").Columns("address", "protocol", "registered_at", "last_heartbeat").
			Values(p.Address, p.Protocol, now, now).Suffix(s.d.upsert([]string{"address"}, []string{"protocol", "last_heartbeat"}))
		if _, err := s.exec(ctx, tx, "upsert executor", up); err != nil {
			return err
		}
		boot := s.sb.Insert("executor_boots").Columns("address", "boot", "at").Values(p.Address, p.Boot, now).
			Suffix(s.d.upsert([]string{"address"}, []string{"boot", "at"}))
		if _, err := s.exec(ctx, tx, "record executor boot", boot); err != nil {
			return err
		}
		del := s.sb.Delete("executor_tasks").Where(sq.Eq{"address": p.Address})
		if len(p.Tasks) > 0 {
			del = del.Where(sq.NotEq{"task_id": p.Tasks})
		}
		if _, err := s.exec(ctx, tx, "drop tasks no longer served", del); err != nil {
			return err
		}
		if len(p.Tasks) == 0 {
			return nil
		}
		ins := s.sb.Insert("executor_tasks").Options(s.d.insertIgnore()[len("INSERT "):]).Columns("task_id", "address", "registered_at")
		for _, t := range p.Tasks {
			ins = ins.Values(t, p.Address, now)
		}
		_, err := s.exec(ctx, tx, "register executor tasks", ins)
		return err
	})
}

// Heartbeat records that the executor at address is alive; ErrNotFound when
// it never registered (it must register again).
func (s *Store) Heartbeat(ctx context.Context, address string, now time.Time) error {
	return s.inTx(ctx, "heartbeat", func(tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, "SELECT 1 FROM executors WHERE address = ?", address).Scan(&one)
		if err == sql.ErrNoRows {
			return notFound("executor", address)
		}
		if err != nil {
			return fmt.Errorf("store: heartbeat: %w", s.d.translate(err))
		}
		_, err = s.exec(ctx, tx, "heartbeat", s.sb.Update("executors").Set("last_heartbeat", now.UnixMilli()).Where(sq.Eq{"address": address}))
		return err
	})
}

// Executors lists registered executors with the tasks they serve, by address.
// taskID, when not empty, keeps those that serve it.
func (s *Store) Executors(ctx context.Context, taskID string) ([]Executor, error) {
	b := s.sb.Select("e.address", "e.protocol", "e.registered_at", "e.last_heartbeat", "b.boot", "t.task_id").
		From("executors e").LeftJoin("executor_boots b ON b.address = e.address").LeftJoin("executor_tasks t ON t.address = e.address").OrderBy("e.address", "t.task_id")
	if taskID != "" {
		b = b.Where(sq.Expr("e.address IN (SELECT address FROM executor_tasks WHERE task_id = ?)", taskID))
	}
	var out []Executor
	err := s.query(ctx, s.read, "read executors", b, func(rows *sql.Rows) error {
		var (
			addr, proto string
			reg, hb     int64
			boot, task  sql.NullString
		)
		if err := rows.Scan(&addr, &proto, &reg, &hb, &boot, &task); err != nil {
			return err
		}
		if len(out) == 0 || out[len(out)-1].Address != addr {
			out = append(out, Executor{Address: addr, Protocol: proto, RegisteredAt: time.UnixMilli(reg).UTC(), LastHeartbeat: time.UnixMilli(hb).UTC(), Boot: boot.String})
		}
		if task.Valid {
			e := &out[len(out)-1]
			e.Tasks = append(e.Tasks, task.String)
		}
		return nil
	})
	for i := range out {
		slices.Sort(out[i].Tasks)
	}
	return out, err
}

func notFound(kind, key string) error { return fmt.Errorf("%s %q: %w", kind, key, ErrNotFound) }

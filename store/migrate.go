package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ax-sched/ax/axtype"
)

// table is the dialect-neutral declaration of one table.
type table struct {
	name    string
	cols    [][2]string // name, type: id, strN, text, int, bigint; "?" suffix = NULL allowed
	primary []string    // when no "id" column
	unique  [][]string
	index   [][]string
}

// migration is one schema version: the tables it creates. Later versions may
// add statements; a migration is never edited once released.
type migration struct {
	version int
	tables  []table
	extra   func(d dialect) []string
}

// Widths of the columns that hold what a pipeline file names, from the
// limits `ax validate` enforces (axtype.MaxNameLen and its neighbours).
var (
	strName   = fmt.Sprintf("str%d", axtype.MaxNameLen)
	strTaskID = fmt.Sprintf("str%d", axtype.MaxTaskIDLen)
	strFile   = fmt.Sprintf("str%d", axtype.MaxFileLen)
	strURL    = fmt.Sprintf("str%d", axtype.MaxURLLen)
)

// SchemaVersion is the newest schema this ax knows.
const SchemaVersion = 14

var migrations = []migration{{
	version: 1,
	tables: []table{
		{name: "pipelines", cols: [][2]string{{"name", strName}, {"file", strFile}, {"hash", "str64"}, {"definition", "text"},
			{"version", "bigint"}, {"removed", "int"}, {"created_at", "bigint"}, {"updated_at", "bigint"}},
			primary: []string{"name"}},
		{name: "tasks", cols: [][2]string{{"id", strTaskID}, {"pipeline", strName}, {"name", strName}, {"group_name", strName},
			{"priority", "int"}, {"hash", "str64"}, {"definition", "text"}, {"version", "bigint"}, {"removed", "int"},
			// next_fire_at: unused since the summary derives it from instances; kept, since v1 is released.
			{"next_fire_at", "bigint?"}, {"created_at", "bigint"}, {"updated_at", "bigint"}},
			primary: []string{"id"}, index: [][]string{{"pipeline"}, {"group_name"}}},
		{name: "runs", cols: [][2]string{{"id", "id"}, {"pipeline", strName}, {"trigger_name", strTaskID}, {"kind", "str16"},
			{"logical_time", "bigint"}, {"dedup_key", "str320?"}, {"backfill_id", "bigint?"}, {"actor", "str128"}, {"created_at", "bigint"}},
			unique: [][]string{{"dedup_key"}}, index: [][]string{{"pipeline", "logical_time"}, {"trigger_name", "kind", "logical_time"}, {"backfill_id"}}},
		{name: "instances", cols: [][2]string{{"id", "id"}, {"run_id", "bigint"}, {"task_id", strTaskID}, {"pipeline", strName},
			{"group_name", strName}, {"state", "str16"}, {"version", "bigint"}, {"ticket", "str64?"}, {"attempt", "int"},
			{"priority", "int"}, {"logical_time", "bigint"}, {"next_fire_at", "bigint?"}, {"executor", strURL + "?"},
			{"started_at", "bigint?"}, {"ended_at", "bigint?"}, {"error", "text?"}, {"reason", "text?"},
			{"created_at", "bigint"}, {"updated_at", "bigint"}},
			unique: [][]string{{"ticket"}, {"run_id", "task_id"}},
			index:  [][]string{{"state", "next_fire_at"}, {"next_fire_at"}, {"task_id", "id"}, {"task_id", "state"}, {"task_id", "logical_time"}, {"pipeline", "logical_time"}}},
		{name: "history", cols: [][2]string{{"id", "id"}, {"instance_id", "bigint"}, {"run_id", "bigint"}, {"task_id", strTaskID},
			{"ticket", "str64?"}, {"from_state", "str16"}, {"to_state", "str16"}, {"reason", "text"}, {"actor", "str128"},
			{"epoch", "bigint"}, {"at", "bigint"}},
			index: [][]string{{"instance_id", "id"}, {"task_id", "id"}}},
		{name: "actions", cols: [][2]string{{"id", "id"}, {"at", "bigint"}, {"actor", "str128"}, {"action", "str64"},
			{"pipeline", strName}, {"task_id", strTaskID}, {"instance_id", "bigint"}, {"ticket", "str64"}, {"reason", "text"}, {"detail", "text"}},
			index: [][]string{{"task_id", "id"}, {"instance_id"}, {"at"}}},
		{name: "executors", cols: [][2]string{{"address", "str255"}, {"protocol", "str16"}, {"registered_at", "bigint"},
			{"last_heartbeat", "bigint"}}, primary: []string{"address"}},
		{name: "executor_tasks", cols: [][2]string{{"task_id", strTaskID}, {"address", "str255"}, {"registered_at", "bigint"}},
			primary: []string{"task_id", "address"}, index: [][]string{{"address"}}},
		{name: "leases", cols: [][2]string{{"name", "str64"}, {"holder", "str255"}, {"epoch", "bigint"},
			{"expires_at", "bigint"}, {"renewed_at", "bigint"}}, primary: []string{"name"}},
		{name: "pauses", cols: [][2]string{{"scope", "str16"}, {"name", strTaskID}, {"actor", "str128"}, {"reason", "text"}, {"at", "bigint"}},
			primary: []string{"scope", "name"}},
		{name: "backfills", cols: [][2]string{{"id", "id"}, {"pipeline", strName}, {"spec", "text"}, {"state", "str16"},
			{"total_runs", "int"}, {"done_runs", "int"}, {"failed_runs", "int"}, {"actor", "str128"}, {"error", "text"},
			{"created_at", "bigint"}, {"updated_at", "bigint"}}, index: [][]string{{"state"}}},
		{name: "settings", cols: [][2]string{{"name", "str128"}, {"value", "text"}, {"updated_at", "bigint"}}, primary: []string{"name"}},
	},
}, {
	// Version 2: operator requests from the CLI, applied by the primary.
	version: 2,
	tables: []table{
		{name: "ops", cols: [][2]string{{"id", "id"}, {"kind", "str16"}, {"target", strTaskID}, {"args", "text"}, {"actor", "str128"},
			{"reason", "text"}, {"state", "str16"}, {"result", "text"}, {"error", "text"}, {"created_at", "bigint"}, {"done_at", "bigint?"}},
			index: [][]string{{"state", "id"}}},
	},
}, {
	// Version 3: the results inbox. Any server stores an executor's
	// result here, by ticket, before acknowledging it; the primary applies it.
	version: 3,
	tables: []table{
		{name: "inbox", cols: [][2]string{{"ticket", "str64"}, {"instance_id", "bigint"}, {"report", "text"}, {"received_by", "str255"},
			{"received_at", "bigint"}, {"applied_at", "bigint?"}, {"applied_epoch", "bigint?"}, {"outcome", "str64?"}},
			primary: []string{"ticket"}, index: [][]string{{"applied_at", "received_at"}}},
	},
}, {
	// Version 4: task output by attempt, the record of each finished attempt
	// (its executor and exit status), and the indexes that keep list reads
	// fast at tens of millions of rows (keyset paging by id per run, per
	// state) and let retention find old runs without a scan.
	version: 4,
	tables: []table{
		{name: "log_chunks", cols: [][2]string{{"id", "id"}, {"instance_id", "bigint"}, {"attempt", "int"}, {"seq", "int"},
			{"text_bytes", "bigint"}, {"dropped", "bigint"}, {"data", "blob"}, {"at", "bigint"}},
			unique: [][]string{{"instance_id", "attempt", "seq"}}},
		{name: "attempts", cols: [][2]string{{"id", "id"}, {"instance_id", "bigint"}, {"attempt", "int"}, {"run_id", "bigint"},
			{"task_id", strTaskID}, {"ticket", "str64"}, {"executor", strURL}, {"status", "str16"}, {"exit_code", "int?"},
			{"error", "text"}, {"started_at", "bigint?"}, {"ended_at", "bigint"}, {"log_bytes", "bigint"}, {"log_dropped", "bigint"}},
			unique: [][]string{{"instance_id", "attempt"}}, index: [][]string{{"task_id", "id"}, {"run_id"}}},
	},
	extra: func(d dialect) []string {
		return []string{
			createIndex(d, "history", "run_id"),
			createIndex(d, "instances", "state", "id"),
			createIndex(d, "runs", "created_at"),
			createIndex(d, "actions", "instance_id", "id"),
		}
	},
}, {
	// Version 5: manual gates keep who approved them (a released gate still
	// waits for its upstreams), and runs keep the trigger's --param values.
	version: 5,
	extra: func(d dialect) []string {
		return []string{
			"ALTER TABLE instances ADD COLUMN approved_by " + d.typ("str128") + " NULL",
			"ALTER TABLE runs ADD COLUMN params " + d.typ("text") + " NULL",
		}
	},
}, {
	// Version 6: what retention keeps of the instances it prunes, per task
	//: outcome counts and the last instance, so summaries survive.
	version: 6,
	tables: []table{
		{name: "task_pruned", cols: [][2]string{{"task_id", strTaskID}, {"success", "bigint"}, {"failed", "bigint"}, {"killed", "bigint"},
			{"last_instance", "bigint"}, {"last_state", "str16"}, {"last_executor", strURL}, {"last_logical", "bigint"},
			{"last_started", "bigint"}, {"last_ended", "bigint"}, {"updated_at", "bigint"}}, primary: []string{"task_id"}},
	},
}, {
	// Version 7: an executor's boot id, so that the primary notices a
	// restart (its in-flight attempts are gone) at the next registration.
	version: 7,
	tables: []table{
		{name: "executor_boots", cols: [][2]string{{"address", "str255"}, {"boot", "str64"}, {"at", "bigint"}}, primary: []string{"address"}},
	},
}, {
	// Version 8: each task's outcome counts, kept by every transition in
	// its transaction, so that a summary reads one row rather than counting
	// the task's instances (fast at millions of instances).
	version: 8,
	tables: []table{
		{name: "task_outcomes", cols: [][2]string{{"task_id", strTaskID}, {"success", "bigint"}, {"failed", "bigint"}}, primary: []string{"task_id"}},
	},
	extra: func(d dialect) []string {
		return []string{"DELETE FROM task_outcomes", FillOutcomes}
	},
}, {
	// Version 9: where each command attempt runs (host, boot, PID namespace,
	// process group and its leader's start time), so that a primary taking
	// over on the same host can tell at once that an inherited attempt's
	// processes are gone.
	version: 9,
	tables: []table{
		{name: "procs", cols: [][2]string{{"ticket", "str64"}, {"instance_id", "bigint"}, {"run_id", "bigint"}, {"host", "str255"},
			{"boot", "str64"}, {"pid_ns", "str64"}, {"pgid", "bigint"}, {"start_ticks", "bigint"}, {"at", "bigint"}},
			primary: []string{"ticket"}, index: [][]string{{"run_id"}}},
	},
}, {
	// Version 10: the scheduler's writes are fenced by a row of their own
	// (FenceName), written with the lease by every take, so that renewing
	// the lease never waits for the holder's writes. The row starts at the
	// lease's epoch; an older ax, which fences on the lease row and would
	// not move this one when it takes over, refuses the store from here on.
	version: 10,
	extra: func(d dialect) []string {
		return []string{d.insertIgnore() + " INTO leases (name, holder, epoch, expires_at, renewed_at) " +
			"SELECT '" + FenceName + "', holder, epoch, expires_at, renewed_at FROM leases WHERE name = '" + LeaseName + "'" + d.ignoreSuffix()}
	},
}, {
	// Version 11: what a procs row records (kind): the process group a
	// command leads (NULL, as in version 9), the scheduler process that
	// handed a local attempt out ("server"), or an attempt claimed ahead of
	// its fire time under an epoch ("held"); and, per epoch, the fire time
	// up to which its held attempts were handed out (handouts). A primary
	// taking over tells a claimed attempt that never started from one that
	// did, and fails at once the in-process attempts of a scheduler process
	// that is gone on its host.
	version: 11,
	tables: []table{
		{name: "handouts", cols: [][2]string{{"epoch", "bigint"}, {"upto", "bigint"}, {"at", "bigint"}}, primary: []string{"epoch"}},
	},
	extra: func(d dialect) []string {
		return []string{
			"ALTER TABLE procs ADD COLUMN kind " + d.typ("str16") + " NULL",
			"ALTER TABLE procs ADD COLUMN epoch " + d.typ("bigint") + " NULL",
		}
	},
}, {
	// Version 12: an instance's attempt is the number of its latest
	// attempt, one past the one before at every dispatch (a give-back and a
	// rerun included), so that each attempt's output and record have a key
	// of their own; counted is how many attempts count against its retries
	// (what attempt was before). The numbers of a store written before are
	// raised past every attempt that has output or a record. The index
	// finds a task's latest attempt (ax logs).
	version: 12,
	extra: func(d dialect) []string {
		return []string{
			"ALTER TABLE instances ADD COLUMN counted " + d.typ("int") + " NOT NULL DEFAULT 0",
			"UPDATE instances SET counted = attempt",
			"UPDATE instances SET attempt = (SELECT MAX(a.attempt) FROM attempts a WHERE a.instance_id = instances.id) " +
				"WHERE attempt < (SELECT MAX(a.attempt) FROM attempts a WHERE a.instance_id = instances.id)",
			"UPDATE instances SET attempt = (SELECT MAX(c.attempt) FROM log_chunks c WHERE c.instance_id = instances.id) " +
				"WHERE attempt < (SELECT MAX(c.attempt) FROM log_chunks c WHERE c.instance_id = instances.id)",
			createIndex(d, "instances", "task_id", "started_at"),
		}
	},
}, {
	// Version 13: an attempt's record keeps the command it ran, its
	// templates rendered (JSON; NULL for other executors and for records
	// written before).
	version: 13,
	extra: func(d dialect) []string {
		return []string{"ALTER TABLE attempts ADD COLUMN argv " + d.typ("text") + " NULL"}
	},
}, {
	// Version 14: an attempt's outputs to its downstream (a JSON object of
	// strings; NULL when it gave none).
	version: 14,
	extra: func(d dialect) []string {
		return []string{"ALTER TABLE attempts ADD COLUMN outputs " + d.typ("text") + " NULL"}
	},
}}

// FillOutcomes counts every task's SUCCESS and FAILED instances into
// task_outcomes (empty before): what version 8 does to a store written
// before it. Transitions keep the counts from then on.
const FillOutcomes = "INSERT INTO task_outcomes (task_id, success, failed) SELECT task_id, " +
	"SUM(CASE WHEN state = 'SUCCESS' THEN 1 ELSE 0 END), SUM(CASE WHEN state = 'FAILED' THEN 1 ELSE 0 END) FROM instances GROUP BY task_id"

// createIndex is a CREATE INDEX for a table made by an earlier migration;
// IF NOT EXISTS (SQLite, MariaDB, PostgreSQL) keeps a repeated migration harmless.
func createIndex(_ dialect, table string, cols ...string) string {
	name := fmt.Sprintf("ix_%s_%s", table, strings.Join(cols, "_"))
	return fmt.Sprintf("CREATE INDEX IF NOT EXISTS %s ON %s (%s)", name, table, strings.Join(cols, ", "))
}

// ddl renders a table's CREATE statements for d.
func (t table) ddl(d dialect) []string {
	var cols []string
	for _, c := range t.cols {
		typ, null := strings.CutSuffix(c[1], "?")
		def := c[0] + " " + d.typ(typ)
		if typ != "id" {
			if null {
				def += " NULL"
			} else {
				def += " NOT NULL"
			}
		}
		cols = append(cols, def)
	}
	if len(t.primary) > 0 {
		cols = append(cols, "PRIMARY KEY ("+strings.Join(t.primary, ", ")+")")
	}
	var out []string
	name := func(kind string, c []string) string {
		return fmt.Sprintf("%s_%s_%s", kind, t.name, strings.Join(c, "_"))
	}
	if d.name == "mysql" {
		for _, u := range t.unique {
			cols = append(cols, fmt.Sprintf("UNIQUE KEY %s (%s)", name("uk", u), strings.Join(u, ", ")))
		}
		for _, ix := range t.index {
			cols = append(cols, fmt.Sprintf("KEY %s (%s)", name("ix", ix), strings.Join(ix, ", ")))
		}
		out = append(out, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (\n  %s\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
			t.name, strings.Join(cols, ",\n  ")))
		return out
	}
	out = append(out, fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s (\n  %s\n)", t.name, strings.Join(cols, ",\n  ")))
	for _, u := range t.unique {
		out = append(out, fmt.Sprintf("CREATE UNIQUE INDEX IF NOT EXISTS %s ON %s (%s)", name("uk", u), t.name, strings.Join(u, ", ")))
	}
	for _, ix := range t.index {
		out = append(out, fmt.Sprintf("CREATE INDEX IF NOT EXISTS %s ON %s (%s)", name("ix", ix), t.name, strings.Join(ix, ", ")))
	}
	return out
}

// migrate brings the schema to SchemaVersion. It is idempotent, safe when two
// processes start at once (SQLite: the write lock; MySQL: a named lock;
// PostgreSQL: an advisory lock), and refuses a database whose schema is
// newer than this binary knows, or a SQLite file or PostgreSQL database
// that belongs to another program.
func (s *Store) migrate(ctx context.Context, now time.Time) error {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return s.d.translate(err)
	}
	defer conn.Close()
	switch s.d {
	case dialectPostgres:
		release, err := migrateLockPostgres(ctx, conn)
		if err != nil {
			return err
		}
		defer release()
		if err := s.checkForeignPostgres(ctx, conn); err != nil {
			return err
		}
	case dialectMySQL:
		var got sql.NullInt64
		if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK('ax_migrate', 30)").Scan(&got); err != nil {
			return s.d.translate(err)
		}
		if got.Int64 != 1 {
			return fmt.Errorf("%w: another process has held the migration lock for 30 s", ErrUnavailable)
		}
		defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK('ax_migrate')") //nolint:errcheck // released with the connection anyway
	default:
		if err := s.checkForeignSQLite(ctx, conn); err != nil {
			return err
		}
	}
	if _, err := conn.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS ax_schema (version "+s.d.typ("int")+" NOT NULL PRIMARY KEY, applied_at "+s.d.typ("bigint")+" NOT NULL)"); err != nil {
		return s.d.translate(err)
	}
	current, err := schemaVersion(ctx, conn)
	if err != nil {
		return s.d.translate(err)
	}
	if current > SchemaVersion {
		return fmt.Errorf("%w: the database has schema version %d, newer than this ax knows (%d): upgrade ax", ErrSchema, current, SchemaVersion)
	}
	for _, m := range migrations {
		if m.version <= current {
			continue
		}
		var stmts []string
		for _, t := range m.tables {
			stmts = append(stmts, t.ddl(s.d)...)
		}
		if m.extra != nil {
			stmts = append(stmts, m.extra(s.d)...)
		}
		for _, q := range stmts {
			if _, err := conn.ExecContext(ctx, q); err != nil && !(strings.Contains(q, " ADD COLUMN ") && duplicateColumn(err)) {
				return fmt.Errorf("store: migrate to version %d: %w", m.version, s.d.translate(err))
			}
		}
		if _, err := conn.ExecContext(ctx, s.d.bind(s.d.insertIgnore()+" INTO ax_schema (version, applied_at) VALUES (?, ?)"+s.d.ignoreSuffix()), m.version, now.UnixMilli()); err != nil {
			return fmt.Errorf("store: record schema version %d: %w", m.version, s.d.translate(err))
		}
	}
	return nil
}

func schemaVersion(ctx context.Context, conn *sql.Conn) (int, error) {
	var v sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT MAX(version) FROM ax_schema").Scan(&v); err != nil {
		return 0, err
	}
	return int(v.Int64), nil
}

// checkForeignSQLite refuses a SQLite file that holds another application's
// tables: ax must not write into a database that is not its own.
func (s *Store) checkForeignSQLite(ctx context.Context, conn *sql.Conn) error {
	return s.checkForeign(ctx, conn, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
		"the SQLite file belongs to another application", "give ax a file of its own")
}

// checkForeign refuses a database whose tables, listed by query, are
// another program's (there are tables, and ax_schema is not one of them):
// the error says what the database is (what) and what to do (hint).
func (s *Store) checkForeign(ctx context.Context, conn *sql.Conn, query, what, hint string) error {
	rows, err := conn.QueryContext(ctx, query)
	if err != nil {
		return s.d.translate(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return s.d.translate(err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		return s.d.translate(err)
	}
	if len(names) > 0 && !slices.Contains(names, "ax_schema") {
		slices.Sort(names)
		if len(names) > 5 {
			names = append(names[:5], "…")
		}
		return fmt.Errorf("%w: %s (tables: %s): %s", ErrSchema, what, strings.Join(names, ", "), hint)
	}
	return nil
}

// SchemaVersion returns the schema version recorded in the database.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	conn, err := s.read.Conn(ctx)
	if err != nil {
		return 0, s.d.translate(err)
	}
	defer conn.Close()
	v, err := schemaVersion(ctx, conn)
	return v, s.d.translate(err)
}

// duplicateColumn reports whether err says a column exists already: an
// ADD COLUMN of a migration that ran before its version was recorded (a
// process stopped in between) is done, not an error.
func duplicateColumn(err error) bool {
	return strings.Contains(strings.ToLower(err.Error()), "duplicate column") || duplicateColumnPostgres(err)
}

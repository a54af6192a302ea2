package store

import (
	"strings"

	sq "github.com/Masterminds/squirrel"
)

// dialect holds every difference between SQLite and MySQL that the store
// needs: DDL types, upsert and insert-ignore syntax, locking reads, and the
// translation of driver errors. Nothing else in the package branches on the
// database.
type dialect struct {
	name string // "sqlite" or "mysql"
}

var (
	dialectSQLite = dialect{name: "sqlite"}
	dialectMySQL  = dialect{name: "mysql"}
)

// column types of the schema, rendered per dialect.
func (d dialect) typ(t string) string {
	if d.name == "sqlite" {
		switch {
		case t == "id":
			return "INTEGER PRIMARY KEY AUTOINCREMENT"
		case strings.HasPrefix(t, "str"), t == "text":
			return "TEXT"
		case t == "blob":
			return "BLOB"
		default:
			return "INTEGER"
		}
	}
	switch {
	case t == "id":
		return "BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY"
	case strings.HasPrefix(t, "str"):
		return "VARCHAR(" + strings.TrimPrefix(t, "str") + ")"
	case t == "text":
		return "MEDIUMTEXT"
	case t == "blob":
		return "MEDIUMBLOB"
	case t == "int":
		return "INT"
	default:
		return "BIGINT"
	}
}

// insertIgnore is the verb of an INSERT that skips rows whose key exists.
func (d dialect) insertIgnore() string {
	if d.name == "sqlite" {
		return "INSERT OR IGNORE"
	}
	return "INSERT IGNORE"
}

// upsert returns the clause that turns an INSERT into an update of cols when
// the row with key exists. MariaDB has no `AS new` alias: use VALUES(col).
func (d dialect) upsert(key []string, cols []string) string {
	set := make([]string, len(cols))
	for i, c := range cols {
		if d.name == "sqlite" {
			set[i] = c + " = excluded." + c
		} else {
			set[i] = c + " = VALUES(" + c + ")"
		}
	}
	if d.name == "sqlite" {
		return "ON CONFLICT (" + strings.Join(key, ", ") + ") DO UPDATE SET " + strings.Join(set, ", ")
	}
	return "ON DUPLICATE KEY UPDATE " + strings.Join(set, ", ")
}

// upsertAdd is upsert where the add columns are summed with the existing
// row's (counters) and the set columns replaced.
func (d dialect) upsertAdd(key, add, set []string) string {
	var parts []string
	for _, c := range add {
		if d.name == "sqlite" {
			parts = append(parts, c+" = "+c+" + excluded."+c)
		} else {
			parts = append(parts, c+" = "+c+" + VALUES("+c+")")
		}
	}
	for _, c := range set {
		if d.name == "sqlite" {
			parts = append(parts, c+" = excluded."+c)
		} else {
			parts = append(parts, c+" = VALUES("+c+")")
		}
	}
	if d.name == "sqlite" {
		return "ON CONFLICT (" + strings.Join(key, ", ") + ") DO UPDATE SET " + strings.Join(parts, ", ")
	}
	return "ON DUPLICATE KEY UPDATE " + strings.Join(parts, ", ")
}

// forUpdate is the suffix of a locking read. SQLite needs none: a write
// transaction (BEGIN IMMEDIATE) holds the database's single write lock.
func (d dialect) forUpdate() string {
	if d.name == "sqlite" {
		return ""
	}
	return " FOR UPDATE"
}

// translate maps a driver error to the store's sentinels (see translate).
func (d dialect) translate(err error) error { return translate(err) }

// lockShared is the suffix of a read that must block a concurrent writer of
// the row until this transaction ends: the lease check of a fenced write.
func (d dialect) lockShared() string {
	if d.name == "sqlite" {
		return ""
	}
	return " LOCK IN SHARE MODE"
}

// matchesCase is the condition that the text expr starts with prefix and
// ends with suffix, letter case included (LIKE ignores it).
func (d dialect) matchesCase(expr, prefix, suffix string) sq.Sqlizer {
	if d == dialectMySQL {
		esc := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
		return sq.Expr(expr+" LIKE BINARY ?", esc.Replace(prefix)+"%"+esc.Replace(suffix))
	}
	esc := strings.NewReplacer(`[`, `[[]`, `*`, `[*]`, `?`, `[?]`)
	return sq.Expr(expr+" GLOB ?", esc.Replace(prefix)+"*"+esc.Replace(suffix))
}

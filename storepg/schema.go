package storepg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// headLen is how many leading key bytes the ordered index holds. B-tree index
// entries must stay under about 2.7 kB, but keys may be store.MaxKeyLen
// (32 KiB) long, so the index holds a key's first headLen bytes and, for the
// rare key longer than that, its SHA-256 to keep entries unique. Ordering by
// (head, key) is ordering by key, because a prefix never sorts after the
// string it begins, so a Scan walks the index and re-sorts only keys that
// share a whole head (the planner's incremental sort).
const headLen = 2048

// migrations are the schema's versions, in order: migrations[i] brings the
// schema from version i to version i+1. Each statement is a format string
// whose %[1]s is the quoted schema name. Released entries never change; a
// new schema is a new entry.
var migrations = [][]string{
	// Version 1: one table for every collection. Collections and keys are
	// bytea, so any Go string fits and the index sorts them by their bytes,
	// as Go compares strings. The index is on expressions: the collection's
	// SHA-256 (collection names may be long too) and the key's head (see
	// headLen).
	{
		`CREATE TABLE %[1]s.records (
			collection bytea NOT NULL,
			key        bytea NOT NULL,
			value      bytea NOT NULL
		)`,
		`CREATE UNIQUE INDEX records_key ON %[1]s.records (` + indexColumns + `)`,
	},
}

// Expressions of the unique, ordered index records_key, which queries repeat
// exactly so that the planner uses the index.
var (
	// collectionHash is the index's first column.
	collectionHash = `sha256(collection)`
	// keyHead is the index's second column: the key's first headLen bytes.
	keyHead = fmt.Sprintf(`substr(key, 1, %d)`, headLen)
	// keyTail tells apart keys that share a head: empty for a key of at
	// most headLen bytes, the key's SHA-256 otherwise.
	keyTail = fmt.Sprintf(`(CASE WHEN octet_length(key) > %d THEN sha256(key) ELSE ''::bytea END)`, headLen)
	// indexColumns is the whole index, also Put's ON CONFLICT target.
	indexColumns = collectionHash + `, ` + keyHead + `, ` + keyTail
)

// migrate creates the schema and brings it to the newest version, recording
// each applied version in schema_migrations. It holds a transaction-scoped
// advisory lock keyed by the schema name, so replicas opening the same schema
// at once take turns: the first migrates and the others find it done.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, "deployplane/storepg:"+schema); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
			return err
		}
		q := pgx.Identifier{schema}.Sanitize()
		if !exists {
			if _, err := tx.Exec(ctx, `CREATE SCHEMA `+q); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+q+`.schema_migrations (
			version    integer PRIMARY KEY,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return err
		}
		var version int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+q+`.schema_migrations`).Scan(&version); err != nil {
			return err
		}
		if version > len(migrations) {
			return fmt.Errorf("schema %s is at version %d, newer than this storepg knows (%d)", q, version, len(migrations))
		}
		for v := version; v < len(migrations); v++ {
			for _, stmt := range migrations[v] {
				if _, err := tx.Exec(ctx, fmt.Sprintf(stmt, q)); err != nil {
					return fmt.Errorf("migration to version %d: %w", v+1, err)
				}
			}
			if _, err := tx.Exec(ctx, `INSERT INTO `+q+`.schema_migrations (version) VALUES ($1)`, v+1); err != nil {
				return err
			}
		}
		return nil
	})
}

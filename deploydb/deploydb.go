package deploydb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/deployplane/deployplane/controlplane"
)

// Defaults of Options.
const (
	DefaultPrefix   = "dp_"
	DefaultTable    = "deployplane_databases"
	DefaultInterval = 250 * time.Millisecond
)

// The environment variables Ensure answers: what an agent server reads.
const (
	EnvDatabaseURI = "DATABASE_URI"
	EnvRedisURI    = "REDIS_URI"
	// EnvRedisKeyPrefix is what the agent server puts in front of every
	// Redis key and channel name it uses: the only ones its Redis user
	// may touch.
	EnvRedisKeyPrefix = "REDIS_KEY_PREFIX"
)

// Options configure a Shared. PostgresDSN is required.
type Options struct {
	// PostgresDSN is the shared PostgreSQL server, as a URL
	// (postgres://user:password@host:5432/dbname?sslmode=...), with a role
	// that may create databases and roles (CREATEDB and CREATEROLE, or a
	// superuser). Its database holds Table. Deployments' DATABASE_URI
	// name the same host and port, with the URL's query (sslmode).
	PostgresDSN string
	// RedisURL is the shared Redis server (redis://[user:password@]host:port,
	// or rediss:// for TLS), Redis 6.2 or later, as a user that may manage
	// ACL users and run SCAN and UNLINK on database 0 (the default user
	// with requirepass, or one with +@all ~* &*); its path is ignored.
	// Clients must not get in without a password: New refuses a server
	// whose default user is on with nopass. "" gives deployments no
	// REDIS_URI.
	RedisURL string
	// Prefix of the databases', roles' and Redis users' names
	// (DefaultPrefix, "dp_"): a deployment's database, role and Redis
	// user are Prefix + its id without dashes, and its Redis keys start
	// with that name and a colon. Installs sharing a server need
	// different prefixes.
	Prefix string
	// Table is the table, in PostgresDSN's database, that records each
	// deployment's database and the passwords of its role and Redis user
	// (DefaultTable). It is created when missing.
	Table string
	// Interval is the longest time between readiness checks
	// (DefaultInterval); the first ones come sooner (see Wait).
	Interval time.Duration
}

// Shared gives every deployment its own database, login role and Redis
// user on shared servers (see the package documentation). It is safe for
// concurrent use, and several control-plane replicas may use the same
// servers at once.
type Shared struct {
	o     Options
	pool  *pgxpool.Pool
	pgURL *url.URL
	rURL  *url.URL
	table string // quoted
	// redis are the options of the shared Redis (nil: none), on database
	// 0; every use dials it anew (dialRedis).
	redis *redis.Options
	// redisCommands are the command rules of the deployments' Redis
	// users, for the shared Redis's version.
	redisCommands []string
}

var prefixRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,20}$`)

// New connects to the shared servers and creates Table when missing.
// It fails when PostgreSQL or Redis does not answer, when the Redis is
// older than 6.2 (no ACL users with channel permissions), lets clients
// in without a password, or its URL's user may not manage ACL users.
func New(ctx context.Context, o *Options) (*Shared, error) {
	var opt Options
	if o != nil {
		opt = *o
	}
	if opt.Prefix == "" {
		opt.Prefix = DefaultPrefix
	}
	if !prefixRE.MatchString(opt.Prefix) {
		return nil, fmt.Errorf("deploydb: prefix %q: want lower-case letters, digits and _, at most 21, not starting with a digit", opt.Prefix)
	}
	if opt.Table == "" {
		opt.Table = DefaultTable
	}
	if opt.Interval <= 0 {
		opt.Interval = DefaultInterval
	}
	if opt.PostgresDSN == "" {
		return nil, errors.New("deploydb: Options.PostgresDSN is required")
	}
	pgURL, err := url.Parse(opt.PostgresDSN)
	if err != nil || (pgURL.Scheme != "postgres" && pgURL.Scheme != "postgresql") || pgURL.Host == "" {
		return nil, errors.New("deploydb: the shared PostgreSQL must be given as a URL: postgres://user:password@host:port/dbname")
	}
	s := &Shared{o: opt, pgURL: pgURL, table: pgx.Identifier{opt.Table}.Sanitize()}
	if opt.RedisURL != "" {
		ro, err := redis.ParseURL(opt.RedisURL)
		if err != nil {
			return nil, fmt.Errorf("deploydb: the shared Redis URL: %w", err)
		}
		if s.rURL, err = url.Parse(opt.RedisURL); err != nil {
			return nil, fmt.Errorf("deploydb: the shared Redis URL: %w", err)
		}
		ro.DB = 0
		ro.DisableIdentity = true
		if ro.DialTimeout == 0 {
			ro.DialTimeout = checkTimeout
		}
		s.redis = ro
	}
	cfg, err := pgxpool.ParseConfig(opt.PostgresDSN)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("deploydb: %w", err)
	}
	cfg.MaxConns = 4
	if s.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		s.Close()
		return nil, fmt.Errorf("deploydb: %w", err)
	}
	if err := s.setup(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// setup creates the table (under an advisory lock: replicas starting
// together) and checks the shared Redis.
func (s *Shared) setup(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", s.o.Table); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+s.table+` (
	name           text PRIMARY KEY,    -- the database's, the role's and the Redis user's name
	tenant         text NOT NULL,
	deployment_id  text NOT NULL,
	password       text NOT NULL,       -- the role's; only the table's owner reads it
	redis_password text,                -- the Redis user's
	created_at     timestamptz NOT NULL DEFAULT now()
)`)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "ALTER TABLE "+s.table+" ADD COLUMN IF NOT EXISTS redis_password text"); err != nil {
			return err
		}
		// The passwords are for the table's owner alone, whatever default
		// privileges the database has.
		_, err = tx.Exec(ctx, "REVOKE ALL ON TABLE "+s.table+" FROM PUBLIC")
		return err
	})
	if err != nil {
		return fmt.Errorf("deploydb: the shared PostgreSQL: %w", err)
	}
	if s.redis == nil {
		return nil
	}
	return s.setupRedis(ctx)
}

// Close closes the connections to the shared servers.
func (s *Shared) Close() {
	if s.pool != nil {
		s.pool.Close()
	}
}

// Name is the database's, the role's and the Redis user's name of a
// deployment.
func (s *Shared) Name(deploymentID string) string {
	return s.o.Prefix + strings.ToLower(strings.ReplaceAll(deploymentID, "-", ""))
}

// nameRE is what a deployment's name may be: it is a Redis key and
// channel pattern too, where *, ?, [ and \ would match other names.
var nameRE = regexp.MustCompile(`^[a-z0-9_]+$`)

// checkName refuses a deployment id that makes no safe name.
func (s *Shared) checkName(deploymentID string) (string, error) {
	name := s.Name(deploymentID)
	if !nameRE.MatchString(name) {
		return "", fmt.Errorf("deploydb: deployment id %q: want letters, digits and dashes", deploymentID)
	}
	return name, nil
}

// assignment is a deployment's row of the table.
type assignment struct {
	name, password, redisPassword string
}

// Ensure makes the deployment's database, login role and Redis user
// exist, then waits until the database answers SELECT 1 as the role and
// Redis answers PING as the user, and returns DATABASE_URI, REDIS_URI and
// REDIS_KEY_PREFIX. It is idempotent: a retried or later deploy of the
// deployment gets the same database, role, user and passwords. While the
// servers do not answer it tries again, soon at first, then every
// Options.Interval, until ctx is done (log gets the progress); Permanent errors return at once. It
// implements deploydocker.Databases.
func (s *Shared) Ensure(ctx context.Context, w *controlplane.Work, log func(line string)) (map[string]string, error) {
	if log == nil {
		log = func(string) {}
	}
	if _, err := s.checkName(w.Deployment.ID); err != nil {
		return nil, Permanent(err)
	}
	var a *assignment
	prepare := Check{What: "the shared PostgreSQL (creating the deployment's database)", Check: func(ctx context.Context) error {
		var err error
		a, err = s.ensure(ctx, w)
		return err
	}}
	if err := Wait(ctx, s.o.Interval, log, prepare); err != nil {
		return nil, err
	}
	env := map[string]string{EnvDatabaseURI: s.databaseURI(a)}
	checks := []Check{{What: "the deployment's database " + a.name, Check: func(ctx context.Context) error {
		return PingPostgres(ctx, env[EnvDatabaseURI])
	}}}
	if s.redis != nil {
		env[EnvRedisURI] = s.redisURI(a)
		env[EnvRedisKeyPrefix] = redisKeyPrefix(a.name)
		checks = append(checks, Check{What: "the shared Redis (creating the deployment's user " + a.name + ")", Check: func(ctx context.Context) error {
			return s.ensureRedisUser(ctx, a)
		}}, Check{What: "the deployment's Redis user " + a.name, Check: func(ctx context.Context) error {
			return PingRedis(ctx, env[EnvRedisURI])
		}})
	}
	if err := Wait(ctx, s.o.Interval, log, checks...); err != nil {
		return nil, err
	}
	return env, nil
}

// ensure does the work of Ensure once.
func (s *Shared) ensure(ctx context.Context, w *controlplane.Work) (*assignment, error) {
	a, err := s.assign(ctx, w)
	if err != nil {
		return nil, err
	}
	limit := int64(-1)
	if w.ResourceSpec != nil {
		if spec := w.ResourceSpec.WithDefaults(); spec.DBMaxConnections != nil {
			limit = *spec.DBMaxConnections
		}
	}
	role := pgx.Identifier{a.name}.Sanitize()
	attrs := fmt.Sprintf(" LOGIN PASSWORD %s CONNECTION LIMIT %d", quoteLiteral(a.password), limit)
	if _, err := s.pool.Exec(ctx, "CREATE ROLE "+role+attrs); isCode(err, "42710") { // duplicate_object: a retry
		_, err = s.pool.Exec(ctx, "ALTER ROLE "+role+attrs)
		if err != nil {
			return nil, classify(fmt.Errorf("altering role %s: %w", a.name, err))
		}
	} else if err != nil {
		return nil, classify(fmt.Errorf("creating role %s: %w", a.name, err))
	}
	var exists bool
	if err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", a.name).Scan(&exists); err != nil {
		return nil, err
	}
	if !exists {
		// Since PostgreSQL 16 a role that is no superuser must be able to
		// SET ROLE to the owner it gives a database.
		var super bool
		if err := s.pool.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super); err != nil {
			return nil, err
		}
		if !super {
			if _, err := s.pool.Exec(ctx, "GRANT "+role+" TO CURRENT_USER"); err != nil {
				return nil, classify(fmt.Errorf("granting role %s: %w", a.name, err))
			}
		}
		// CREATE DATABASE cannot run in a transaction: a concurrent
		// Ensure of the same deployment may win the race.
		if _, err := s.pool.Exec(ctx, "CREATE DATABASE "+role+" OWNER "+role); err != nil && !isCode(err, "42P04") {
			return nil, classify(fmt.Errorf("creating database %s: %w", a.name, err))
		}
	}
	// Only the deployment's role (and superusers) may connect to it.
	if _, err := s.pool.Exec(ctx, "REVOKE CONNECT, TEMPORARY ON DATABASE "+role+" FROM PUBLIC"); err != nil {
		return nil, classify(fmt.Errorf("revoking public access to database %s: %w", a.name, err))
	}
	return a, nil
}

// assign returns the deployment's row of the table, making it (with new
// passwords) when missing, and giving a row without a Redis password
// one. One statement: replicas assigning at once agree.
func (s *Shared) assign(ctx context.Context, w *controlplane.Work) (*assignment, error) {
	a := &assignment{name: s.Name(w.Deployment.ID)}
	err := s.pool.QueryRow(ctx, "INSERT INTO "+s.table+" AS t (name, tenant, deployment_id, password, redis_password) VALUES ($1, $2, $3, $4, $5) "+
		"ON CONFLICT (name) DO UPDATE SET redis_password = COALESCE(t.redis_password, EXCLUDED.redis_password) RETURNING password, redis_password",
		a.name, w.Tenant, w.Deployment.ID, randomHex(24), randomHex(24)).Scan(&a.password, &a.redisPassword)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// Remove drops the deployment's database (WITH (FORCE): its sessions are
// ended) and role, deletes its Redis user (ending its connections) and
// every key under its prefix, and forgets its passwords. The data is gone.
// It is idempotent, and removes what is named after the deployment even
// when the table has no row for it. It implements deploydocker.Databases.
func (s *Shared) Remove(ctx context.Context, tenant, deploymentID string) error {
	name, err := s.checkName(deploymentID)
	if err != nil {
		return err
	}
	q := pgx.Identifier{name}.Sanitize()
	if _, err := s.pool.Exec(ctx, "DROP DATABASE IF EXISTS "+q+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("deploydb: dropping database %s: %w", name, err)
	}
	if _, err := s.pool.Exec(ctx, "DROP ROLE IF EXISTS "+q); err != nil {
		return fmt.Errorf("deploydb: dropping role %s: %w", name, err)
	}
	if s.redis != nil {
		if err := s.removeRedis(ctx, name); err != nil {
			return err
		}
	}
	if _, err := s.pool.Exec(ctx, "DELETE FROM "+s.table+" WHERE name = $1", name); err != nil {
		return fmt.Errorf("deploydb: %w", err)
	}
	return nil
}

// databaseURI is the deployment's DATABASE_URI: the shared server's host,
// port and query, with the deployment's role, password and database.
func (s *Shared) databaseURI(a *assignment) string {
	u := *s.pgURL
	u.User = url.UserPassword(a.name, a.password)
	u.Path = "/" + a.name
	u.RawPath = ""
	return u.String()
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func isCode(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}

// classify marks the errors that waiting does not cure: missing
// privileges (SQLSTATE class 42, e.g. 42501 insufficient_privilege).
func classify(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && strings.HasPrefix(pe.Code, "42") {
		return Permanent(err)
	}
	return err
}

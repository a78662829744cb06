package deploydb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
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
)

// ErrRedisFull is returned by Ensure when every database number of the
// shared Redis is taken by another deployment. It is Permanent: raise
// "databases" in redis.conf (then restart Redis), or give deployments
// their own Redis.
var ErrRedisFull = errors.New("deploydb: every database number of the shared Redis is taken")

// Options configure a Shared. PostgresDSN is required.
type Options struct {
	// PostgresDSN is the shared PostgreSQL server, as a URL
	// (postgres://user:password@host:5432/dbname?sslmode=...), with a role
	// that may create databases and roles (CREATEDB and CREATEROLE, or a
	// superuser). Its database holds Table. Deployments' DATABASE_URI
	// name the same host and port, with the URL's query (sslmode).
	PostgresDSN string
	// RedisURL is the shared Redis server (redis://[user:password@]host:port,
	// or rediss:// for TLS); its path is ignored. "" gives deployments no
	// REDIS_URI.
	RedisURL string
	// RedisDatabases is how many database numbers the shared Redis has
	// (0, the default: asked with CONFIG GET databases, which Redis
	// answers 16 unless configured otherwise; set it where CONFIG is
	// disabled).
	RedisDatabases int
	// Prefix of the databases' and roles' names (DefaultPrefix, "dp_"):
	// a deployment's database and role are Prefix + its id without dashes.
	// Installs sharing a server need different prefixes.
	Prefix string
	// Table is the table, in PostgresDSN's database, that records each
	// deployment's database, role password and Redis number
	// (DefaultTable). It is created when missing.
	Table string
	// Interval is the time between readiness checks (DefaultInterval).
	Interval time.Duration
}

// Shared gives every deployment its own database, login role and Redis
// database number on shared servers (see the package documentation). It
// is safe for concurrent use, and several control-plane replicas may use
// the same servers at once.
type Shared struct {
	o     Options
	pool  *pgxpool.Pool
	pgURL *url.URL
	rURL  *url.URL
	table string // quoted
	redis *redis.Client
}

var prefixRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,20}$`)

// New connects to the shared servers and creates Table when missing.
// It fails when PostgreSQL or Redis does not answer.
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
		s.redis = redis.NewClient(ro)
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
// together) and learns Redis's number of databases.
func (s *Shared) setup(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", s.o.Table); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+s.table+` (
	name          text PRIMARY KEY,     -- the database's and the role's name
	tenant        text NOT NULL,
	deployment_id text NOT NULL,
	password      text NOT NULL,        -- the role's; only the table's owner reads it
	redis_db      integer UNIQUE,       -- the deployment's Redis database number
	created_at    timestamptz NOT NULL DEFAULT now()
)`)
		if err != nil {
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
	if s.o.RedisDatabases > 0 {
		return s.redis.Ping(ctx).Err()
	}
	got, err := s.redis.ConfigGet(ctx, "databases").Result()
	if err != nil {
		return fmt.Errorf("deploydb: the shared Redis: CONFIG GET databases: %w (set Options.RedisDatabases where CONFIG is disabled)", err)
	}
	n, err := strconv.Atoi(got["databases"])
	if err != nil || n <= 0 {
		return fmt.Errorf("deploydb: the shared Redis answered databases = %q", got["databases"])
	}
	s.o.RedisDatabases = n
	return nil
}

// Close closes the connections to the shared servers.
func (s *Shared) Close() {
	if s.pool != nil {
		s.pool.Close()
	}
	if s.redis != nil {
		s.redis.Close()
	}
}

// Name is the database's and the role's name of a deployment.
func (s *Shared) Name(deploymentID string) string {
	return s.o.Prefix + strings.ToLower(strings.ReplaceAll(deploymentID, "-", ""))
}

// assignment is a deployment's row of the table.
type assignment struct {
	name, password string
	redisDB        *int
}

// Ensure makes the deployment's database, login role and Redis number
// exist, then waits until the database answers SELECT 1 as the role and
// Redis answers PING on the number, and returns DATABASE_URI and
// REDIS_URI. It is idempotent: a retried or later deploy of the
// deployment gets the same database, role, password and number. While
// the servers do not answer it tries again every Options.Interval until
// ctx is done (log gets the progress); ErrRedisFull and other
// Permanent errors return at once. It implements deploydocker.Databases.
func (s *Shared) Ensure(ctx context.Context, w *controlplane.Work, log func(line string)) (map[string]string, error) {
	if log == nil {
		log = func(string) {}
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
	if a.redisDB != nil {
		env[EnvRedisURI] = s.redisURI(*a.redisDB)
		checks = append(checks, Check{What: fmt.Sprintf("the deployment's Redis database %d", *a.redisDB), Check: func(ctx context.Context) error {
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

// assign returns the deployment's row of the table, making it (with a
// new password and the lowest free Redis number) when missing. The
// table is locked for the allocation, so replicas never hand out one
// number twice.
func (s *Shared) assign(ctx context.Context, w *controlplane.Work) (*assignment, error) {
	a := &assignment{name: s.Name(w.Deployment.ID)}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "LOCK TABLE "+s.table+" IN SHARE ROW EXCLUSIVE MODE"); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, "SELECT password, redis_db FROM "+s.table+" WHERE name = $1", a.name).Scan(&a.password, &a.redisDB)
		if err == nil {
			if a.redisDB != nil || s.redis == nil {
				return nil
			}
		} else if !errors.Is(err, pgx.ErrNoRows) {
			return err
		} else {
			a.password = randomHex(24)
		}
		if s.redis != nil {
			var n int
			err := tx.QueryRow(ctx, "SELECT n FROM generate_series(0, $1::int - 1) AS n WHERE n NOT IN (SELECT redis_db FROM "+
				s.table+" WHERE redis_db IS NOT NULL) ORDER BY n LIMIT 1", s.o.RedisDatabases).Scan(&n)
			if errors.Is(err, pgx.ErrNoRows) {
				return Permanent(fmt.Errorf("%w: all %d are taken (raise \"databases\" in redis.conf and restart Redis)",
					ErrRedisFull, s.o.RedisDatabases))
			}
			if err != nil {
				return err
			}
			a.redisDB = &n
		}
		_, err = tx.Exec(ctx, "INSERT INTO "+s.table+" (name, tenant, deployment_id, password, redis_db) VALUES ($1, $2, $3, $4, $5) "+
			"ON CONFLICT (name) DO UPDATE SET redis_db = EXCLUDED.redis_db", a.name, w.Tenant, w.Deployment.ID, a.password, a.redisDB)
		return err
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

// Remove drops the deployment's database (WITH (FORCE): its sessions are
// ended) and role, empties its Redis number (FLUSHDB) and frees the
// number. The data is gone. It is idempotent, and removes the database
// and role named after the deployment even when the table has no row
// for it. It implements deploydocker.Databases.
func (s *Shared) Remove(ctx context.Context, tenant, deploymentID string) error {
	name := s.Name(deploymentID)
	q := pgx.Identifier{name}.Sanitize()
	if _, err := s.pool.Exec(ctx, "DROP DATABASE IF EXISTS "+q+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("deploydb: dropping database %s: %w", name, err)
	}
	if _, err := s.pool.Exec(ctx, "DROP ROLE IF EXISTS "+q); err != nil {
		return fmt.Errorf("deploydb: dropping role %s: %w", name, err)
	}
	var n *int
	err := s.pool.QueryRow(ctx, "SELECT redis_db FROM "+s.table+" WHERE name = $1", name).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deploydb: %w", err)
	}
	if n != nil && s.redis != nil {
		// FLUSHDB on the number, on one connection that SELECTs it.
		conn := s.redis.Conn()
		_, err := conn.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Select(ctx, *n)
			p.FlushDB(ctx)
			return nil
		})
		conn.Close()
		if err != nil {
			return fmt.Errorf("deploydb: emptying Redis database %d: %w", *n, err)
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

// redisURI is the deployment's REDIS_URI: the shared Redis with its
// number as the path.
func (s *Shared) redisURI(n int) string {
	u := *s.rURL
	u.Path = "/" + strconv.Itoa(n)
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

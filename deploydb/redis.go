package deploydb

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// redisCommands are the commands a deployment's Redis user may run, as
// ACL rules (each version's additions follow). Written as "-command
// +command|subcommand" rather than "-command|subcommand", which Redis
// 6.2 does not know.
var redisCommands = []string{
	"-@all",
	// The data types, keys, transactions, Lua scripts, publish and
	// subscribe, and the connection's own commands (AUTH, HELLO, PING,
	// ...). Module commands stay out: they belong to no category here.
	"+@read", "+@write", "+@keyspace", "+@string", "+@hash", "+@list", "+@set", "+@sortedset", "+@stream",
	"+@bitmap", "+@hyperloglog", "+@geo", "+@pubsub", "+@transaction", "+@scripting", "+@connection",
	// Nothing that administers the server or that Redis calls dangerous:
	// FLUSHALL, FLUSHDB, KEYS, CONFIG, ACL, DEBUG, SHUTDOWN, MONITOR,
	// INFO, SWAPDB, MIGRATE, RESTORE, SORT, CLIENT KILL and LIST, ...
	"-@admin", "-@dangerous", "-sort",
	// Nor another database number, nor the key names of the whole
	// database (SCAN, RANDOMKEY, DBSIZE), nor other channels' names
	// (PUBSUB CHANNELS, NUMSUB).
	"-select", "-move", "-copy", "-scan", "-randomkey", "-dbsize", "-pubsub",
	// Of CLIENT only the connection's own name, id and information (not
	// TRACKING, whose broadcasts name other keys).
	"-client", "+client|setname", "+client|getname", "+client|id", "+client|info",
	// Of SCRIPT only loading and asking; the script cache is the
	// server's, and so is a running script (FLUSH, KILL, DEBUG).
	"-script", "+script|load", "+script|exists",
}

// redisCommandsSince are the rules of redisCommands that name commands
// of a later version.
var redisCommandsSince = []struct {
	major, minor int
	rules        []string
}{
	// Functions are the server's: a library one deployment loads (or
	// flushes) is every deployment's.
	{7, 0, []string{"-function"}},
	// The client libraries name themselves on connect.
	{7, 2, []string{"+client|setinfo"}},
}

// setupRedis checks that the shared Redis can keep deployments apart:
// version 6.2 or later (ACL users with channel permissions), no entry
// without a password, and a URL user that may manage ACL users.
func (s *Shared) setupRedis(ctx context.Context) error {
	r, closeR, err := dialRedis(ctx, s.redis)
	if err != nil {
		return fmt.Errorf("deploydb: the shared Redis: %w", err)
	}
	defer closeR()
	hello, err := r.Do(ctx, "HELLO").Result()
	if err != nil {
		if isRedisReply(err) { // Redis before 6.2 wants HELLO's version; before 6, no HELLO
			return fmt.Errorf("deploydb: the shared Redis answers HELLO with %q: it needs Redis 6.2 or later (ACL users with channel permissions)", err)
		}
		return fmt.Errorf("deploydb: the shared Redis: %w", err)
	}
	version, _ := field(hello, "version").(string)
	major, minor, ok := parseVersion(version)
	if !ok {
		return fmt.Errorf("deploydb: the shared Redis answers version %q: it needs Redis 6.2 or later", version)
	}
	if major < 6 || major == 6 && minor < 2 {
		return fmt.Errorf("deploydb: the shared Redis is version %s: it needs Redis 6.2 or later (ACL users with channel permissions)", version)
	}
	s.redisCommands = append([]string(nil), redisCommands...)
	for _, since := range redisCommandsSince {
		if major > since.major || major == since.major && minor >= since.minor {
			s.redisCommands = append(s.redisCommands, since.rules...)
		}
	}
	def, err := r.Do(ctx, "ACL", "GETUSER", "default").Result()
	if err != nil {
		return fmt.Errorf("deploydb: the shared Redis: ACL GETUSER default: %w (the URL's user must manage ACL users)", err)
	}
	var on, nopass bool
	flags, _ := field(def, "flags").([]any)
	for _, f := range flags {
		on = on || f == "on"
		nopass = nopass || f == "nopass"
	}
	if on && nopass {
		return errors.New("deploydb: the shared Redis lets clients in without a password (its default user is on with nopass), " +
			"so any deployment could act as that user: set requirepass, or turn the default user off")
	}
	return nil
}

// ensureRedisUser makes the deployment's Redis user exist with its
// password, its key and channel prefix and redisCommands, replacing
// whatever rules it had, and saves the server's ACL file.
func (s *Shared) ensureRedisUser(ctx context.Context, a *assignment) error {
	prefix := redisKeyPrefix(a.name)
	args := []any{"ACL", "SETUSER", a.name, "reset", "on", ">" + a.redisPassword, "~" + prefix + "*", "resetchannels", "&" + prefix + "*"}
	for _, rule := range s.redisCommands {
		args = append(args, rule)
	}
	r, closeR, err := dialRedis(ctx, s.redis)
	if err != nil {
		return err
	}
	defer closeR()
	if err := r.Do(ctx, args...).Err(); err != nil {
		return classifyRedis(fmt.Errorf("creating Redis user %s: %w", a.name, err))
	}
	return saveACL(ctx, r)
}

// removeRedis deletes the deployment's Redis user, which ends its
// connections, then every key under its prefix (on database 0, the only
// one the user can reach).
func (s *Shared) removeRedis(ctx context.Context, name string) error {
	r, closeR, err := dialRedis(ctx, s.redis)
	if err != nil {
		return fmt.Errorf("deploydb: the shared Redis: %w", err)
	}
	defer closeR()
	if err := r.Do(ctx, "ACL", "DELUSER", name).Err(); err != nil {
		return fmt.Errorf("deploydb: deleting Redis user %s: %w", name, err)
	}
	match := redisKeyPrefix(name) + "*"
	var cursor uint64
	for {
		keys, next, err := r.Scan(ctx, cursor, match, 1000).Result()
		if err != nil {
			return fmt.Errorf("deploydb: listing the Redis keys of %s: %w", name, err)
		}
		if len(keys) > 0 {
			if err := r.Unlink(ctx, keys...).Err(); err != nil {
				return fmt.Errorf("deploydb: deleting the Redis keys of %s: %w", name, err)
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	if err := saveACL(ctx, r); err != nil {
		return fmt.Errorf("deploydb: %w", err)
	}
	return nil
}

// saveACL writes the server's users to its ACL file (the aclfile
// setting), so that they outlive a restart. A server without one keeps
// users in memory only.
func saveACL(ctx context.Context, r *redis.Client) error {
	err := r.Do(ctx, "ACL", "SAVE").Err()
	if err != nil && !strings.Contains(err.Error(), "not configured to use an ACL file") {
		return classifyRedis(fmt.Errorf("saving the Redis ACL file: %w", err))
	}
	return nil
}

// redisKeyPrefix is the deployment's REDIS_KEY_PREFIX: its name and a
// colon, so that no deployment's prefix starts another's.
func redisKeyPrefix(name string) string { return name + ":" }

// redisURI is the deployment's REDIS_URI: the shared Redis as the
// deployment's user, on database 0.
func (s *Shared) redisURI(a *assignment) string {
	u := *s.rURL
	u.User = url.UserPassword(a.name, a.redisPassword)
	u.Path = "/0"
	u.RawPath = ""
	return u.String()
}

// classifyRedis marks the Redis errors that waiting does not cure: a
// missing permission of the URL's user, a rule the server refuses.
func classifyRedis(err error) error {
	var re redis.Error
	if errors.As(err, &re) {
		if msg := re.Error(); strings.HasPrefix(msg, "NOPERM") || strings.HasPrefix(msg, "ERR Error in ACL SETUSER") {
			return Permanent(err)
		}
	}
	return err
}

// isRedisReply tells an error the server answered from one of the
// connection.
func isRedisReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// field is a field of a map reply: a map in RESP3, a flat list of names
// and values in RESP2.
func field(reply any, name string) any {
	switch r := reply.(type) {
	case map[any]any:
		return r[name]
	case map[string]any:
		return r[name]
	case []any:
		for i := 0; i+1 < len(r); i += 2 {
			if r[i] == name {
				return r[i+1]
			}
		}
	}
	return nil
}

// parseVersion parses the major and minor numbers of a version "7.0.15".
func parseVersion(v string) (major, minor int, ok bool) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return major, minor, err1 == nil && err2 == nil
}

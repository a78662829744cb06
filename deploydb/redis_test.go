package deploydb_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/deployplane/deployplane/deploydb"
	"github.com/deployplane/deployplane/internal/testredis"
)

// A deployment's Redis credentials reach its own keys and channels only:
// not another deployment's keys (read, write, delete, rename onto, in a
// script), nor its channels, nor the key names of the whole database,
// another database number, or anything that administers the server. It
// uses its own prefix normally, and the other deployment's data, user
// and server come out unharmed.
func TestRedisIsolation(t *testing.T) {
	dsn := needPostgres(t)
	// DEBUG enabled: the ACL is what refuses it.
	rs := testredis.Start(t, 16, "--enable-debug-command", "yes")
	s, _ := newShared(t, dsn, rs.URL(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	envA, err := s.Ensure(ctx, work(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	envB, err := s.Ensure(ctx, work(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	a, pa := redisOf(t, envA[deploydb.EnvRedisURI]), envA[deploydb.EnvRedisKeyPrefix]
	b, pb := redisOf(t, envB[deploydb.EnvRedisURI]), envB[deploydb.EnvRedisKeyPrefix]
	userB := strings.TrimSuffix(pb, ":")
	admin := rs.Client(t, 0)

	// B's data, and a key of A's own.
	if err := b.Set(ctx, pb+"k", "b", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.HSet(ctx, pb+"h", "f", "b").Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.RPush(ctx, pb+"l", "b").Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.XAdd(ctx, &redis.XAddArgs{Stream: pb + "s", Values: []string{"f", "b"}}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := a.Set(ctx, pa+"x", "a", 0).Err(); err != nil {
		t.Fatal(err)
	}
	maxmemory := admin.ConfigGet(ctx, "maxmemory").Val()["maxmemory"]

	nokey := "NOPERM"
	for _, c := range []struct {
		args []any
		want string // the error starts with or contains it
	}{
		// B's keys.
		{[]any{"GET", pb + "k"}, nokey},
		{[]any{"SET", pb + "k", "a"}, nokey},
		{[]any{"DEL", pb + "k"}, nokey},
		{[]any{"UNLINK", pb + "k"}, nokey},
		{[]any{"EXPIRE", pb + "k", 1}, nokey},
		{[]any{"HGETALL", pb + "h"}, nokey},
		{[]any{"LPOP", pb + "l"}, nokey},
		{[]any{"XRANGE", pb + "s", "-", "+"}, nokey},
		{[]any{"RENAME", pa + "x", pb + "k"}, nokey},
		{[]any{"DUMP", pb + "k"}, nokey},
		{[]any{"EVAL", "return redis.call('GET', KEYS[1])", 1, pb + "k"}, nokey},
		{[]any{"EVAL", "return redis.call('DEL', ARGV[1])", 0, pb + "k"}, "can't access"},
		{[]any{"EVAL", "return redis.call('FLUSHALL')", 0}, "can't run"},
		// B's channels, and any pattern but A's own.
		{[]any{"PUBLISH", pb + "ch", "a"}, "NOPERM"},
		// The key and channel names of everyone.
		{[]any{"KEYS", "*"}, "NOPERM"},
		{[]any{"SCAN", 0}, "NOPERM"},
		{[]any{"RANDOMKEY"}, "NOPERM"},
		{[]any{"DBSIZE"}, "NOPERM"},
		{[]any{"PUBSUB", "CHANNELS"}, "NOPERM"},
		{[]any{"SORT", pa + "x", "BY", pb + "*"}, "NOPERM"},
		// Other database numbers.
		{[]any{"SELECT", 1}, "NOPERM"},
		{[]any{"MOVE", pa + "x", 1}, "NOPERM"},
		{[]any{"COPY", pa + "x", pa + "y", "DB", 1}, "NOPERM"},
		{[]any{"SWAPDB", 0, 1}, "NOPERM"},
		// The server's administration.
		{[]any{"FLUSHALL"}, "NOPERM"},
		{[]any{"FLUSHDB"}, "NOPERM"},
		{[]any{"CONFIG", "SET", "maxmemory", "1"}, "NOPERM"},
		{[]any{"CONFIG", "GET", "requirepass"}, "NOPERM"},
		{[]any{"ACL", "SETUSER", userB, ">stolen"}, "NOPERM"},
		{[]any{"ACL", "DELUSER", userB}, "NOPERM"},
		{[]any{"ACL", "LIST"}, "NOPERM"},
		{[]any{"ACL", "LOG"}, "NOPERM"},
		{[]any{"SCRIPT", "FLUSH"}, "NOPERM"},
		{[]any{"SCRIPT", "KILL"}, "NOPERM"},
		{[]any{"FUNCTION", "FLUSH"}, "NOPERM"},
		{[]any{"FUNCTION", "LIST"}, "NOPERM"},
		{[]any{"CLIENT", "LIST"}, "NOPERM"},
		{[]any{"CLIENT", "KILL", "USER", userB}, "NOPERM"},
		{[]any{"CLIENT", "PAUSE", 1000}, "NOPERM"},
		{[]any{"CLIENT", "TRACKING", "ON", "BCAST"}, "NOPERM"},
		{[]any{"INFO"}, "NOPERM"},
		{[]any{"MONITOR"}, "NOPERM"},
		{[]any{"SLOWLOG", "GET"}, "NOPERM"},
		{[]any{"DEBUG", "SLEEP", 0}, "NOPERM"},
		{[]any{"MIGRATE", "127.0.0.1", 1, pb + "k", 0, 1000}, "NOPERM"},
		{[]any{"BGSAVE"}, "NOPERM"},
		{[]any{"REPLICAOF", "127.0.0.1", 1}, "NOPERM"},
		{[]any{"SHUTDOWN", "NOSAVE"}, "NOPERM"},
	} {
		err := a.Do(ctx, c.args...).Err()
		if err == nil || !strings.HasPrefix(err.Error(), c.want) && !strings.Contains(err.Error(), c.want) {
			t.Errorf("A's %v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
	for _, ch := range []string{pb + "ch"} {
		sub := a.Subscribe(ctx, ch)
		if _, err := sub.Receive(ctx); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
			t.Errorf("A subscribing to B's channel %s: %v, want NOPERM", ch, err)
		}
		sub.Close()
	}
	for _, pattern := range []string{"*", pb + "*", userB + "*"} {
		sub := a.PSubscribe(ctx, pattern)
		if _, err := sub.Receive(ctx); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
			t.Errorf("A subscribing to the pattern %s: %v, want NOPERM", pattern, err)
		}
		sub.Close()
	}

	// B and the server are unharmed.
	if got, err := b.Get(ctx, pb+"k").Result(); err != nil || got != "b" {
		t.Errorf("B's key after A's attempts: %q, %v", got, err)
	}
	if n, err := admin.Exists(ctx, pb+"h", pb+"l", pb+"s").Result(); err != nil || n != 3 {
		t.Errorf("%d of B's 3 other keys after A's attempts (%v)", n, err)
	}
	if got := admin.ConfigGet(ctx, "maxmemory").Val()["maxmemory"]; got != maxmemory {
		t.Errorf("maxmemory %q after A's attempts, was %q", got, maxmemory)
	}
	if err := deploydb.PingRedis(ctx, envB[deploydb.EnvRedisURI]); err != nil {
		t.Errorf("B's REDIS_URI after A's attempts: %v", err)
	}
	if n, err := admin.Exists(ctx, pa+"x").Result(); err != nil || n != 1 {
		t.Errorf("A's own key after its attempts: %d, %v (on another number?)", n, err)
	}
	if n, err := rs.Client(t, 1).DBSize(ctx).Result(); err != nil || n != 0 {
		t.Errorf("database 1 holds %d keys after A's attempts (%v)", n, err)
	}

	// A's own prefix works as an agent server uses it.
	useOwnPrefix(ctx, t, a, pa)
}

// useOwnPrefix runs what an agent server does with Redis under its prefix:
// strings, hashes, lists (a blocking pop), sets, sorted sets, streams,
// transactions, Lua scripts, publish and subscribe.
func useOwnPrefix(ctx context.Context, t *testing.T, r *redis.Client, p string) {
	t.Helper()
	check := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s under its own prefix: %v", what, err)
		}
	}
	check("SET", r.Set(ctx, p+"run:1", "v", time.Minute).Err())
	check("INCR", r.Incr(ctx, p+"attempts:1").Err())
	check("EXPIRE", r.Expire(ctx, p+"attempts:1", time.Minute).Err())
	if got, err := r.Get(ctx, p+"run:1").Result(); err != nil || got != "v" {
		t.Errorf("GET under its own prefix: %q, %v", got, err)
	}
	check("HSET", r.HSet(ctx, p+"h", "f", "v").Err())
	check("HGETALL", r.HGetAll(ctx, p+"h").Err())
	check("LPUSH", r.LPush(ctx, p+"queue", "wake").Err())
	if got, err := r.BRPop(ctx, time.Second, p+"queue").Result(); err != nil || len(got) != 2 || got[1] != "wake" {
		t.Errorf("BRPOP under its own prefix: %q, %v", got, err)
	}
	check("SADD", r.SAdd(ctx, p+"set", "m").Err())
	check("ZADD", r.ZAdd(ctx, p+"z", redis.Z{Score: 1, Member: "m"}).Err())
	check("XADD", r.XAdd(ctx, &redis.XAddArgs{Stream: p + "stream", Values: []string{"event", "data"}}).Err())
	check("XREAD", r.XRead(ctx, &redis.XReadArgs{Streams: []string{p + "stream", "0"}, Count: 1, Block: -1}).Err())
	_, err := r.TxPipelined(ctx, func(tx redis.Pipeliner) error {
		tx.Set(ctx, p+"tx", "1", 0)
		tx.Incr(ctx, p+"tx")
		return nil
	})
	check("MULTI/EXEC", err)
	check("WATCH", r.Watch(ctx, func(tx *redis.Tx) error { return tx.Get(ctx, p+"tx").Err() }, p+"tx"))
	script := redis.NewScript("return redis.call('INCR', KEYS[1])")
	check("EVALSHA", script.Run(ctx, r, []string{p + "counter"}).Err())
	check("RENAME", r.Rename(ctx, p+"counter", p+"counter2").Err())
	check("DEL", r.Del(ctx, p+"counter2", p+"tx").Err())
	check("CLIENT SETNAME", r.Do(ctx, "CLIENT", "SETNAME", "agent").Err())

	for _, sub := range []*redis.PubSub{r.Subscribe(ctx, p+"run:1:stream"), r.PSubscribe(ctx, p+"*")} {
		if _, err := sub.Receive(ctx); err != nil {
			t.Errorf("subscribing under its own prefix: %v", err)
			sub.Close()
			continue
		}
		check("PUBLISH", r.Publish(ctx, p+"run:1:stream", "event").Err())
		if m, err := sub.ReceiveMessage(ctx); err != nil || m.Payload != "event" {
			t.Errorf("the message on its own channel: %v, %v", m, err)
		}
		sub.Close()
	}
}

// With an ACL file (the aclfile setting) the deployments' users are saved
// there, so that they outlive a restart of Redis; Remove saves their
// deletion too.
func TestRedisUsersSaved(t *testing.T) {
	dsn := needPostgres(t)
	rs := testredis.StartACLFile(t, 16)
	s, _ := newShared(t, dsn, rs.URL(), nil)
	ctx := context.Background()
	w, removed := work(nil), work(nil)
	env, err := s.Ensure(ctx, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	goneEnv, err := s.Ensure(ctx, removed, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(ctx, tenant, removed.Deployment.ID); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(rs.ACLFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(file), "user "+s.Name(w.Deployment.ID)+" ") || strings.Contains(string(file), s.Name(removed.Deployment.ID)) {
		t.Errorf("the ACL file does not hold just the remaining deployment's user:\n%s", file)
	}
	rs.Restart(t)
	if err := deploydb.PingRedis(ctx, env[deploydb.EnvRedisURI]); err != nil {
		t.Errorf("the deployment's REDIS_URI after Redis restarted: %v", err)
	}
	useOwnPrefix(ctx, t, redisOf(t, env[deploydb.EnvRedisURI]), env[deploydb.EnvRedisKeyPrefix])
	if err := deploydb.PingRedis(ctx, goneEnv[deploydb.EnvRedisURI]); err == nil {
		t.Error("the removed deployment's REDIS_URI logs in after Redis restarted")
	}
}

// New refuses a shared Redis that cannot keep deployments apart: one that
// lets clients in without a password, one whose URL's user may not
// manage ACL users, and one older than 6.2 (no HELLO without arguments:
// Redis 6.0 wants a protocol version, 5 knows no HELLO; here a Redis
// 7 with HELLO disabled answers as Redis 5 does).
func TestNewRefusesRedis(t *testing.T) {
	dsn := needPostgres(t)
	ctx := context.Background()
	// A server whose default user takes no password, used through an
	// administrator of its own.
	open := testredis.Start(t, 16)
	for _, rules := range [][]any{{"admin", "on", ">adminpw", "~*", "&*", "+@all"}, {"default", "nopass"}} {
		if err := open.Client(t, 0).Do(ctx, append([]any{"ACL", "SETUSER"}, rules...)...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	asUser := func(s *testredis.Server, user, password string) string {
		return (&url.URL{Scheme: "redis", User: url.UserPassword(user, password), Host: s.Addr}).String()
	}
	limited := testredis.Start(t, 16)
	if err := limited.Client(t, 0).Do(ctx, "ACL", "SETUSER", "limited", "on", ">limitedpw", "~*", "&*", "+@all", "-@admin").Err(); err != nil {
		t.Fatal(err)
	}
	old := testredis.Start(t, 16, "--rename-command", "HELLO", "")
	for _, c := range []struct {
		name, url, want string
	}{
		{"no password", asUser(open, "admin", "adminpw"), "without a password"},
		{"no ACL privilege", asUser(limited, "limited", "limitedpw"), "manage ACL users"},
		{"old", old.URL(), "6.2 or later"},
	} {
		t.Run(c.name, func(t *testing.T) {
			prefix := uniq("t")
			o := &deploydb.Options{PostgresDSN: dsn, RedisURL: c.url, Prefix: prefix, Table: prefix + "databases"}
			t.Cleanup(func() { cleanPrefix(t, dsn, o.Prefix, o.Table) })
			s, err := deploydb.New(ctx, o)
			if err == nil {
				s.Close()
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("New: %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// fill writes n keys under prefix.
func fill(t *testing.T, r *redis.Client, prefix string, n int) {
	t.Helper()
	_, err := r.Pipelined(context.Background(), func(p redis.Pipeliner) error {
		for i := range n {
			p.Set(context.Background(), fmt.Sprintf("%skey:%d", prefix, i), "v", 0)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

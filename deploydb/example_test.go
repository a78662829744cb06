package deploydb_test

import (
	"context"
	"fmt"
	"log"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploydb"
)

// Give a deployment a database and a Redis user on shared servers, then
// remove them when it is deleted.
func ExampleShared() {
	ctx := context.Background()
	s, err := deploydb.New(ctx, &deploydb.Options{
		PostgresDSN: "postgres://admin:secret@db.internal:5432/postgres?sslmode=require",
		RedisURL:    "redis://:secret@redis.internal:6379",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	w := &controlplane.Work{Tenant: "tenant-id", Deployment: controlplane.Deployment{ID: "0193f1a2-8c4b-7d3e-9f10-2a3b4c5d6e7f"},
		ResourceSpec: &controlplane.ResourceSpec{DBMaxConnections: new(int64(50))}}
	env, err := s.Ensure(ctx, w, func(line string) { log.Print(line) })
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(env[deploydb.EnvDatabaseURI])    // postgres://dp_0193f1a2...:<password>@db.internal:5432/dp_0193f1a2...?sslmode=require
	fmt.Println(env[deploydb.EnvRedisURI])       // redis://dp_0193f1a2...:<password>@redis.internal:6379/0
	fmt.Println(env[deploydb.EnvRedisKeyPrefix]) // dp_0193f1a28c4b7d3e9f102a3b4c5d6e7f:

	// DELETE: the database, the role, the Redis user and its keys are gone.
	if err := s.Remove(ctx, w.Tenant, w.Deployment.ID); err != nil {
		log.Fatal(err)
	}
}

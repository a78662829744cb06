package deploydocker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploydb"
)

// LabelRole says what a container is to its deployment: RoleServer (a
// revision's replica; containers without the label are too), RolePostgres
// or RoleRedis (the deployment's own database and Redis, which outlive
// revisions and go with the deployment). Their volumes carry it too.
const (
	LabelRole    = "io.deployplane.role"
	RoleServer   = "server"
	RolePostgres = "postgres"
	RoleRedis    = "redis"
)

// Defaults of Services.
const (
	DefaultPostgresDataPath = "/var/lib/postgresql/data"
	DefaultRedisDataPath    = "/data"
)

// Databases gives each deployment its database and Redis (wire contract
// section 10). The Deployer calls Ensure for every revision, before the
// revision's containers start, and Remove when the deployment is deleted.
// Two implementations: the per-deployment containers of Options.Services,
// and *deploydb.Shared (a database, role and Redis user per deployment
// on servers the operator shares). A Kubernetes deployer can take the same
// interface.
type Databases interface {
	// Ensure makes the deployment's database and Redis exist (the first
	// time; later revisions, retries and restarts get the same ones, with
	// their data), waits until they answer, and returns the environment
	// the revision's containers get: DATABASE_URI and REDIS_URI (and, on
	// a shared Redis, REDIS_KEY_PREFIX), over their secrets of the same
	// names. log receives its progress (the revision's deploy log). It keeps trying
	// until ctx is done (the Deployer bounds it with
	// Options.DatabaseTimeout); an error marked deploydb.Permanent says
	// waiting longer would not help.
	Ensure(ctx context.Context, w *controlplane.Work, log func(line string)) (map[string]string, error)
	// Remove deletes the deployment's database and Redis and their data.
	// Teardown calls it once the deployment's containers are gone. It is
	// idempotent.
	Remove(ctx context.Context, tenant, deploymentID string) error
}

// Services are the images of the database and Redis each deployment gets
// as containers of its own (wire contract section 10), and where their
// data lives. The deployer starts one of each per deployment before its
// first revision's containers, keeps them (and their data) across
// revisions, and removes them with their data on Teardown. The revision's
// containers get DATABASE_URI and REDIS_URI.
//
// The images are driven as the official postgres and redis images are:
//
//   - PostgreSQL: environment POSTGRES_PASSWORD (random per deployment;
//     a restarted control plane reads it back from the container), PGPORT
//     and PORT; arguments "-p PORT" and "-c max_connections=N" from
//     db_max_connections, and on the host network "-c
//     listen_addresses=127.0.0.1" (the image passes arguments that start
//     with "-" to postgres). DATABASE_URI is
//     postgres://postgres:PASSWORD@HOST:PORT/postgres?sslmode=disable.
//   - Redis: "redis-server --port PORT --requirepass PASSWORD --dir
//     RedisDataPath", "--maxmemory Nmb" from redis_memory_mb, and on the
//     host network "--bind 127.0.0.1". REDIS_URI is
//     redis://:PASSWORD@HOST:PORT/0.
//
// Limits come from resource_spec with controlplane.ResourceSpec.WithDefaults
// applied: db_cpu becomes CPU shares and db_cpu_limit a CPU quota,
// db_memory_mb a memory reservation and db_memory_limit_mb the hard limit,
// for PostgreSQL. redis_memory_mb is Redis's maxmemory; its container's
// hard limit leaves a quarter more (at least 32 MB) for Redis's own
// overhead, so that Redis refuses writes before the kernel kills it.
// db_storage_gi is not enforced: a Docker volume (or a directory) has no
// size limit of its own; size the filesystem under DataDir, or the
// daemon's volumes, for it.
type Services struct {
	// PostgresImage, e.g. "postgres:16-alpine"; "" starts no database.
	PostgresImage string
	// RedisImage, e.g. "redis:7-alpine"; "" starts no Redis.
	RedisImage string
	// PostgresDataPath is where PostgresImage keeps its data
	// (DefaultPostgresDataPath, the PGDATA of the official images up to
	// PostgreSQL 17; those of 18 and later want /var/lib/postgresql): the
	// deployment's data is mounted there.
	PostgresDataPath string
	// RedisDataPath is where Redis keeps its data (DefaultRedisDataPath;
	// passed as --dir).
	RedisDataPath string
	// DataDir, when set, is an absolute directory under which each
	// deployment's data lives, DataDir/INSTANCE/TENANT/DEPLOYMENT/postgres
	// and .../redis, bind-mounted into the containers. The Deployer
	// creates and (on DELETE) removes those directories itself, so the
	// control plane must run on the daemon's machine with the right to
	// remove what the containers wrote (as root). "" (the default): each
	// deployment's data is a named Docker volume per service, labelled
	// like its containers, which Teardown removes.
	DataDir string
}

func (s Services) withDefaults() Services {
	if s.PostgresDataPath == "" {
		s.PostgresDataPath = DefaultPostgresDataPath
	}
	if s.RedisDataPath == "" {
		s.RedisDataPath = DefaultRedisDataPath
	}
	return s
}

// containerDatabases is the Databases of Options.Services: containers of
// the deployment's own.
type containerDatabases struct {
	d *Deployer
	s Services
}

// service is a running service container of a deployment.
type service struct {
	role string
	id   string
	name string
	port int
	env  map[string]string // the container's environment
	// restarts is the container's restart count when it was created,
	// adopted or started: more since then is a crash.
	restarts int
}

// databases runs Databases.Ensure for the revision within
// Options.DatabaseTimeout and returns the environment of its containers.
func (x *run) databases(ctx context.Context) ([]string, error) {
	d, w := x.d, x.w
	if d.dbs == nil {
		return nil, nil
	}
	log := func(line string) { d.logLine(ctx, w, controlplane.LogDeploy, controlplane.LevelInfo, line) }
	log("preparing the deployment's database and Redis")
	dctx, cancel := context.WithTimeout(ctx, d.o.DatabaseTimeout)
	env, err := d.dbs.Ensure(dctx, w, log)
	timedOut := dctx.Err() != nil
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, errTornDown) {
			return nil, err
		}
		// "Not ready within" only for a wait that used up its time: an
		// error before then (a final one, marked deploydb.Permanent, or
		// one a step gave up on) is reported as what it is.
		if !timedOut || errors.Is(err, deploydb.ErrPermanent) {
			return nil, fmt.Errorf("The deployment's database and Redis could not be prepared: %v", err)
		}
		return nil, fmt.Errorf("The deployment's database and Redis were not ready within %s: %v", d.o.DatabaseTimeout, err)
	}
	// A Teardown that ran meanwhile removed what it found: remove what
	// Ensure made after it, and stop.
	mu := d.lock(w.Tenant, w.Deployment.ID)
	mu.Lock()
	removed := d.isRemoved(w.Tenant, w.Deployment.ID)
	mu.Unlock()
	if removed {
		if err := d.dbs.Remove(context.WithoutCancel(ctx), w.Tenant, w.Deployment.ID); err != nil {
			d.log.Warn("deploydocker: removing the database of a deleted deployment", "deployment", w.Deployment.ID, "err", err)
		}
		return nil, errTornDown
	}
	keys := slices.Sorted(maps.Keys(env))
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	log("the deployment's database and Redis are ready")
	return out, nil
}

// Ensure starts (or adopts) the deployment's database and Redis
// containers and waits until PostgreSQL answers SELECT 1 and Redis PING.
func (c *containerDatabases) Ensure(ctx context.Context, w *controlplane.Work, log func(string)) (map[string]string, error) {
	d := c.d
	spec := controlplane.ResourceSpec{}
	if w.ResourceSpec != nil {
		spec = w.ResourceSpec.WithDefaults()
	}
	env := map[string]string{}
	var checks []deploydb.Check
	if img := c.s.PostgresImage; img != "" {
		s, err := c.ensureService(ctx, w, log, RolePostgres, img, c.s.PostgresDataPath, func(port int, r *container.Resources) ([]string, []string) {
			if spec.DBCPU != nil {
				r.CPUShares = max(2, int64(math.Round(*spec.DBCPU*1024)))
			}
			if spec.DBCPULimit != nil {
				r.NanoCPUs = int64(math.Round(*spec.DBCPULimit * 1e9))
			}
			if spec.DBMemoryMB != nil {
				r.MemoryReservation = *spec.DBMemoryMB << 20
			}
			if spec.DBMemoryLimitMB != nil {
				r.Memory = *spec.DBMemoryLimitMB << 20
			}
			p := strconv.Itoa(port)
			args := []string{"-p", p}
			if d.o.Network == "host" {
				args = append(args, "-c", "listen_addresses=127.0.0.1")
			}
			if n := spec.DBMaxConnections; n != nil {
				args = append(args, "-c", "max_connections="+strconv.FormatInt(*n, 10))
				if *n <= 3 { // PostgreSQL keeps 3 for superusers unless told otherwise
					args = append(args, "-c", "superuser_reserved_connections=0")
				}
			}
			return []string{"POSTGRES_PASSWORD=" + randomHex(16), "PGPORT=" + p, "PORT=" + p}, args
		})
		if err != nil {
			return nil, err
		}
		uri := func(addr string) string {
			u := url.URL{Scheme: "postgres", User: url.UserPassword("postgres", s.env["POSTGRES_PASSWORD"]), Host: addr,
				Path: "/postgres", RawQuery: "sslmode=disable"}
			return u.String()
		}
		env[deploydb.EnvDatabaseURI] = uri(c.serviceAddr(s))
		checks = append(checks, c.check(s, "database", func(ctx context.Context, addr string) error {
			return deploydb.PingPostgres(ctx, uri(addr))
		}))
	}
	if img := c.s.RedisImage; img != "" {
		s, err := c.ensureService(ctx, w, log, RoleRedis, img, c.s.RedisDataPath, func(port int, r *container.Resources) ([]string, []string) {
			p := strconv.Itoa(port)
			pw := randomHex(16)
			args := []string{"redis-server", "--port", p, "--requirepass", pw, "--dir", c.s.RedisDataPath}
			if d.o.Network == "host" {
				args = append(args, "--bind", "127.0.0.1")
			}
			if m := spec.RedisMemoryMB; m != nil {
				r.Memory = (*m + max(*m/4, 32)) << 20
				args = append(args, "--maxmemory", strconv.FormatInt(*m, 10)+"mb")
			}
			return []string{"REDIS_PASSWORD=" + pw, "PORT=" + p}, args
		})
		if err != nil {
			return nil, err
		}
		uri := func(addr string) string {
			u := url.URL{Scheme: "redis", User: url.UserPassword("", s.env["REDIS_PASSWORD"]), Host: addr, Path: "/0"}
			return u.String()
		}
		env[deploydb.EnvRedisURI] = uri(c.serviceAddr(s))
		checks = append(checks, c.check(s, "Redis", func(ctx context.Context, addr string) error {
			return deploydb.PingRedis(ctx, uri(addr))
		}))
	}
	if err := deploydb.Wait(ctx, d.o.HealthInterval, log, checks...); err != nil {
		return nil, err
	}
	return env, nil
}

// check is the readiness check of a service container: ping answers on
// the address the control plane reaches it at. A container that exited,
// crashed (it is restarting, or restarted since ensureService saw it) or
// was removed fails at once, with its exit code and the end of its
// output: it will not answer.
func (c *containerDatabases) check(s *service, what string, ping func(ctx context.Context, addr string) error) deploydb.Check {
	d := c.d
	return deploydb.Check{
		What: fmt.Sprintf("the deployment's %s (container %s, port %d)", what, s.name, s.port),
		Check: func(ctx context.Context) error {
			res, err := d.cli.ContainerInspect(ctx, s.id, client.ContainerInspectOptions{})
			if cerrdefs.IsNotFound(err) {
				return deploydb.Permanent(fmt.Errorf("container %s was removed", s.name))
			}
			if err != nil {
				return err
			}
			ci := res.Container
			if st := ci.State; st != nil && (st.Status == container.StateExited || st.Status == container.StateDead ||
				st.Restarting || ci.RestartCount > s.restarts) {
				return deploydb.Permanent(d.exited(ctx, &ctr{id: s.id, name: s.name}, ci))
			}
			addr := c.reachAddr(s, ci)
			if addr == "" {
				return errors.New("the container has no address yet")
			}
			return ping(ctx, addr)
		},
	}
}

// serviceAddr is where a revision's containers reach a service:
// 127.0.0.1 on the host network, its container name (Docker's DNS on
// user-defined networks) otherwise.
func (c *containerDatabases) serviceAddr(s *service) string {
	if c.d.o.Network == "host" {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	}
	return net.JoinHostPort(s.name, strconv.Itoa(s.port))
}

// reachAddr is where the control plane reaches a service: 127.0.0.1 on
// the host network, the container's address on its network otherwise.
func (c *containerDatabases) reachAddr(s *service, ci container.InspectResponse) string {
	if c.d.o.Network == "host" {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	}
	if ci.NetworkSettings != nil {
		if ep := ci.NetworkSettings.Networks[c.d.o.Network]; ep != nil && ep.IPAddress.IsValid() {
			return net.JoinHostPort(ep.IPAddress.String(), strconv.Itoa(s.port))
		}
	}
	return ""
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// serviceName is the name of a deployment's service container and of its
// volume.
func (d *Deployer) serviceName(deploymentID, role string) string {
	return fmt.Sprintf("dp-%s-%s-%s", unsafeName.ReplaceAllString(d.o.Instance, "_"), deploymentID, role)
}

// dataDir is the directory of a deployment's data under Services.DataDir.
func (c *containerDatabases) dataDir(tenant, deploymentID string) string {
	return filepath.Join(c.s.DataDir, unsafeName.ReplaceAllString(c.d.o.Instance, "_"),
		unsafeName.ReplaceAllString(tenant, "_"), unsafeName.ReplaceAllString(deploymentID, "_"))
}

// ensureService adopts the deployment's service container of role, or
// creates and starts it with its data mounted at dataPath (config gives
// its environment and arguments for a port).
func (c *containerDatabases) ensureService(ctx context.Context, w *controlplane.Work, log func(string), role, image, dataPath string,
	config func(port int, r *container.Resources) (env, args []string)) (*service, error) {
	d := c.d
	name := d.serviceName(w.Deployment.ID, role)
	res, err := d.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		log("pulling " + image + " for the deployment's " + role)
		if err := d.pull(ctx, w, image, false, log); err != nil {
			return nil, fmt.Errorf("pulling the %s image %s: %w", role, image, err)
		}
		port := d.o.ServerPort
		switch {
		case d.o.Network != "host" && role == RolePostgres:
			port = 5432
		case d.o.Network != "host" && role == RoleRedis:
			port = 6379
		case d.o.Network == "host":
			if port, err = d.ports.take(ctx, d); err != nil {
				return nil, err
			}
		}
		var r container.Resources
		env, args := config(port, &r)
		labels := map[string]string{LabelInstance: d.o.Instance, LabelTenant: w.Tenant, LabelDeployment: w.Deployment.ID,
			LabelRole: role, LabelPort: strconv.Itoa(port)}
		mu := d.lock(w.Tenant, w.Deployment.ID)
		mu.Lock()
		if d.isRemoved(w.Tenant, w.Deployment.ID) {
			mu.Unlock()
			return nil, errTornDown
		}
		m, err := c.dataMount(ctx, w, role, dataPath, labels)
		if err == nil {
			_, err = d.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
				Name:   name,
				Config: &container.Config{Image: image, Env: env, Cmd: args, Labels: labels},
				HostConfig: &container.HostConfig{NetworkMode: container.NetworkMode(d.o.Network),
					RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyUnlessStopped}, Resources: r,
					Mounts: []mount.Mount{m}},
			})
		}
		mu.Unlock()
		if err != nil && !cerrdefs.IsConflict(err) {
			return nil, fmt.Errorf("creating the deployment's %s: %w", role, err)
		}
		if err == nil {
			log(fmt.Sprintf("created the deployment's %s %s (port %d, data in %s)", role, name, port, m.Source))
		}
		if res, err = d.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{}); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("inspecting %s: %w", name, err)
	}
	ci := res.Container
	restarts := ci.RestartCount
	if ci.State != nil && !ci.State.Running && !ci.State.Restarting {
		if _, err := d.cli.ContainerStart(ctx, ci.ID, client.ContainerStartOptions{}); err != nil {
			return nil, deploydb.Permanent(fmt.Errorf("starting the deployment's %s: %w", role, err))
		}
		restarts = 0 // a start resets the count
	}
	s := &service{role: role, id: ci.ID, name: name, env: map[string]string{}, restarts: restarts}
	if ci.Config != nil {
		s.port, _ = strconv.Atoi(ci.Config.Labels[LabelPort])
		for _, kv := range ci.Config.Env {
			k, v, _ := strings.Cut(kv, "=")
			s.env[k] = v
		}
	}
	return s, nil
}

// dataMount is the mount of a service's data: a directory under DataDir
// (made here), or a named volume labelled like the container.
func (c *containerDatabases) dataMount(ctx context.Context, w *controlplane.Work, role, dataPath string, labels map[string]string) (mount.Mount, error) {
	if c.s.DataDir != "" {
		dir := filepath.Join(c.dataDir(w.Tenant, w.Deployment.ID), role)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return mount.Mount{}, fmt.Errorf("the %s data directory: %w", role, err)
		}
		return mount.Mount{Type: mount.TypeBind, Source: dir, Target: dataPath}, nil
	}
	name := c.d.serviceName(w.Deployment.ID, role)
	vl := maps.Clone(labels)
	delete(vl, LabelPort)
	if _, err := c.d.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name, Labels: vl}); err != nil {
		return mount.Mount{}, fmt.Errorf("creating the %s volume %s: %w", role, name, err)
	}
	return mount.Mount{Type: mount.TypeVolume, Source: name, Target: dataPath}, nil
}

// Remove removes the deployment's service containers, then their data:
// the volumes, or the directory under DataDir.
func (c *containerDatabases) Remove(ctx context.Context, tenant, deploymentID string) error {
	d := c.d
	var errs []error
	for _, role := range []string{RolePostgres, RoleRedis} {
		cs, err := d.list(ctx, LabelTenant+"="+tenant, LabelDeployment+"="+deploymentID, LabelRole+"="+role)
		if err != nil {
			return err
		}
		for _, ct := range cs {
			errs = append(errs, d.remove(ctx, ct.ID, false))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := d.removeVolumes(ctx, LabelTenant+"="+tenant, LabelDeployment+"="+deploymentID); err != nil {
		return err
	}
	if c.s.DataDir != "" {
		if err := os.RemoveAll(c.dataDir(tenant, deploymentID)); err != nil {
			return fmt.Errorf("removing the deployment's data: %w", err)
		}
	}
	return nil
}

// removeVolumes removes the instance's volumes with the labels.
func (d *Deployer) removeVolumes(ctx context.Context, labels ...string) error {
	f := make(client.Filters).Add("label", LabelInstance+"="+d.o.Instance)
	for _, l := range labels {
		f.Add("label", l)
	}
	res, err := d.cli.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		return fmt.Errorf("listing volumes: %w", err)
	}
	var errs []error
	for _, v := range res.Items {
		if _, err := d.cli.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("removing volume %s: %w", v.Name, err))
		}
	}
	return errors.Join(errs...)
}

// reconcileData removes the data volumes (and DataDir directories) of
// deployments that no longer exist: their Teardown ran in a process that
// died before removing them, or they were deleted while no control plane
// ran this Deployer.
func (d *Deployer) reconcileData(ctx context.Context) error {
	c, ok := d.dbs.(*containerDatabases)
	if !ok {
		return nil
	}
	gone := func(tenant, dep string) (bool, error) {
		_, err := d.o.State.GetDeployment(ctx, tenant, dep)
		if isNotFound(err) {
			return true, nil
		}
		return false, err
	}
	var errs []error
	res, err := d.cli.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).Add("label", LabelInstance+"="+d.o.Instance)})
	if err != nil {
		return fmt.Errorf("listing volumes: %w", err)
	}
	seen := map[[2]string]bool{}
	for _, v := range res.Items {
		k := [2]string{v.Labels[LabelTenant], v.Labels[LabelDeployment]}
		if k[0] == "" || k[1] == "" || seen[k] {
			continue
		}
		seen[k] = true
		if g, err := gone(k[0], k[1]); err != nil {
			errs = append(errs, err)
		} else if g {
			d.log.Info("deploydocker: removing the data of a deleted deployment", "deployment", k[1])
			errs = append(errs, c.Remove(ctx, k[0], k[1]))
		}
	}
	if c.s.DataDir != "" {
		root := filepath.Join(c.s.DataDir, unsafeName.ReplaceAllString(d.o.Instance, "_"))
		tenants, _ := os.ReadDir(root)
		for _, t := range tenants {
			deps, _ := os.ReadDir(filepath.Join(root, t.Name()))
			for _, dep := range deps {
				if g, err := gone(t.Name(), dep.Name()); err != nil {
					errs = append(errs, err)
				} else if g {
					errs = append(errs, c.Remove(ctx, t.Name(), dep.Name()))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// isService reports whether a container is a deployment's service rather
// than a revision's replica.
func isService(labels map[string]string) bool {
	r := labels[LabelRole]
	return r == RolePostgres || r == RoleRedis
}

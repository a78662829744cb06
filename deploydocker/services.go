package deploydocker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/deployplane/deployplane/controlplane"
)

// LabelRole says what a container is to its deployment: RoleServer (a
// revision's replica; containers without the label are too), RolePostgres
// or RoleRedis (the deployment's own database and Redis, which outlive
// revisions and go with the deployment).
const (
	LabelRole    = "io.deployplane.role"
	RoleServer   = "server"
	RolePostgres = "postgres"
	RoleRedis    = "redis"
)

// Services are the images of the database and Redis each deployment gets
// (wire contract section 10). The deployer starts one of each per
// deployment before its first revision's containers, keeps them across
// revisions, and removes them (with their anonymous volumes) on Teardown.
// The revision's containers get DATABASE_URI and REDIS_URI.
//
// On the host network each service gets its own port from the port range:
// PostgreSQL is told it by PGPORT and "-p PORT" (the official image passes
// arguments that start with "-" to postgres), Redis by "redis-server
// --port PORT". Both also get PORT. PostgreSQL's password is random per
// deployment (POSTGRES_PASSWORD; a restarted control plane reads it back
// from the container). Limits come from resource_spec: db_cpu, db_cpu_limit,
// db_memory_mb and db_memory_limit_mb for PostgreSQL, redis_memory_mb for
// Redis (its memory limit, and maxmemory).
type Services struct {
	// PostgresImage, e.g. "postgres:16-alpine"; "" starts no database.
	PostgresImage string
	// RedisImage, e.g. "redis:7-alpine"; "" starts no Redis.
	RedisImage string
}

// service is a running service container of a deployment.
type service struct {
	role string
	id   string
	name string
	port int
	env  map[string]string // the container's environment
}

// ensureServices starts (or adopts) the deployment's database and Redis
// and returns the environment the revision's containers get.
func (d *Deployer) ensureServices(ctx context.Context, w *controlplane.Work) ([]string, error) {
	if d.o.Services == nil {
		return nil, nil
	}
	var env []string
	spec := controlplane.ResourceSpec{}
	if w.ResourceSpec != nil {
		spec = w.ResourceSpec.WithDefaults()
	}
	if img := d.o.Services.PostgresImage; img != "" {
		s, err := d.ensureService(ctx, w, RolePostgres, img, func(port int, r *container.Resources) ([]string, []string) {
			pw := randomHex(16)
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
			return []string{"POSTGRES_PASSWORD=" + pw, "PGPORT=" + p, "PORT=" + p}, []string{"-p", p}
		})
		if err != nil {
			return nil, err
		}
		env = append(env, fmt.Sprintf("DATABASE_URI=postgres://postgres:%s@%s/postgres?sslmode=disable",
			s.env["POSTGRES_PASSWORD"], d.serviceAddr(s)))
	}
	if img := d.o.Services.RedisImage; img != "" {
		s, err := d.ensureService(ctx, w, RoleRedis, img, func(port int, r *container.Resources) ([]string, []string) {
			p := strconv.Itoa(port)
			args := []string{"redis-server", "--port", p}
			if spec.RedisMemoryMB != nil {
				r.Memory = *spec.RedisMemoryMB << 20
				args = append(args, "--maxmemory", strconv.FormatInt(*spec.RedisMemoryMB, 10)+"mb")
			}
			return []string{"PORT=" + p}, args
		})
		if err != nil {
			return nil, err
		}
		env = append(env, "REDIS_URI=redis://"+d.serviceAddr(s))
	}
	return env, nil
}

// serviceAddr is where a service answers: 127.0.0.1 on the host network,
// its container name (Docker's DNS on user-defined networks) otherwise.
func (d *Deployer) serviceAddr(s *service) string {
	if d.o.Network == "host" {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
	}
	return net.JoinHostPort(s.name, strconv.Itoa(s.port))
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// ensureService adopts the deployment's service container of role, or
// creates and starts it (config gives its environment and arguments for
// a port), and waits until its port accepts connections.
func (d *Deployer) ensureService(ctx context.Context, w *controlplane.Work, role, image string,
	config func(port int, r *container.Resources) (env, args []string)) (*service, error) {
	name := fmt.Sprintf("dp-%s-%s-%s", unsafeName.ReplaceAllString(d.o.Instance, "_"), w.Deployment.ID, role)
	res, err := d.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		d.logLine(ctx, w, controlplane.LogDeploy, controlplane.LevelInfo, "pulling "+image+" for the deployment's "+role)
		if err := d.pull(ctx, w, image, false); err != nil {
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
		_, err = d.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Name:   name,
			Config: &container.Config{Image: image, Env: env, Cmd: args, Labels: labels},
			HostConfig: &container.HostConfig{NetworkMode: container.NetworkMode(d.o.Network),
				RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyUnlessStopped}, Resources: r},
		})
		mu.Unlock()
		if err != nil && !cerrdefs.IsConflict(err) {
			return nil, fmt.Errorf("creating the deployment's %s: %w", role, err)
		}
		if err == nil {
			d.logLine(ctx, w, controlplane.LogDeploy, controlplane.LevelInfo, fmt.Sprintf("created the deployment's %s %s (port %d)", role, name, port))
		}
		if res, err = d.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{}); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("inspecting %s: %w", name, err)
	}
	ci := res.Container
	if ci.State != nil && !ci.State.Running && !ci.State.Restarting {
		if _, err := d.cli.ContainerStart(ctx, ci.ID, client.ContainerStartOptions{}); err != nil {
			return nil, fmt.Errorf("starting the deployment's %s: %w", role, err)
		}
	}
	s := &service{role: role, id: ci.ID, name: name, env: map[string]string{}}
	if ci.Config != nil {
		s.port, _ = strconv.Atoi(ci.Config.Labels[LabelPort])
		for _, kv := range ci.Config.Env {
			k, v, _ := strings.Cut(kv, "=")
			s.env[k] = v
		}
	}
	if err := d.waitPort(ctx, s); err != nil {
		return nil, err
	}
	return s, nil
}

// waitPort waits until the service's port accepts connections (within
// HealthTimeout); a container that exits fails at once.
func (d *Deployer) waitPort(ctx context.Context, s *service) error {
	deadline := time.Now().Add(d.o.HealthTimeout)
	addr := d.serviceAddr(s)
	if d.o.Network != "host" {
		res, err := d.cli.ContainerInspect(ctx, s.id, client.ContainerInspectOptions{})
		if err == nil && res.Container.NetworkSettings != nil {
			if ep := res.Container.NetworkSettings.Networks[d.o.Network]; ep != nil && ep.IPAddress.IsValid() {
				addr = net.JoinHostPort(ep.IPAddress.String(), strconv.Itoa(s.port))
			}
		}
	}
	for {
		c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			return nil
		}
		res, ierr := d.cli.ContainerInspect(ctx, s.id, client.ContainerInspectOptions{})
		if ierr == nil && res.Container.State != nil && res.Container.State.Status == container.StateExited {
			return d.exited(ctx, &ctr{id: s.id, name: strings.TrimPrefix(res.Container.Name, "/")}, res.Container)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the deployment's %s did not accept connections on %s within %s", s.role, addr, d.o.HealthTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d.o.HealthInterval):
		}
	}
}

// isService reports whether a container is a deployment's service rather
// than a revision's replica.
func isService(labels map[string]string) bool {
	r := labels[LabelRole]
	return r == RolePostgres || r == RoleRedis
}

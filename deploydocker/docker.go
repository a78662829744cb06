package deploydocker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/moby/moby/api/pkg/authconfig"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/registry"
	"github.com/moby/moby/client"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane"
	"github.com/deployplane/deployplane/deploydb"
)

// errTornDown: the deployment was torn down in this process while a
// revision of it was deploying; no container may be created for it.
var errTornDown = errors.New("deploydocker: the deployment was deleted")

func isNotFound(err error) bool { return errors.Is(err, apierr.ErrNotFound) }

// ctr is one container of a revision, as the Deployer knows it.
type ctr struct {
	id      string
	name    string
	replica int
	port    int    // LabelPort
	addr    string // host:port the proxy and the health check reach
	adopted bool   // made by an earlier Deploy, not this one
	created bool   // created, never started (when inspected)
	early   bool   // created while the image was pulled
	image   string // the ID of the image it was created from
	logged  bool   // its line (created, adopting) is in the deploy log
}

// Pull retries: the first after pullBackoff, each next one after twice
// the wait before, at most pullBackoffMax.
const (
	pullBackoff    = time.Second
	pullBackoffMax = 30 * time.Second
)

// pull pulls image, with the credentials Options.Credentials gives. An
// image a Builder made is pulled only when the daemon lacks it. A final
// error (see finalPullError) returns at once, marked deploydb.Permanent;
// any other is retried with backoff, each failure a line to log, until
// Options.PullRetryTimeout has passed since the first attempt or the next
// attempt would start after ctx's deadline. The error names Docker's
// answer, not the image (the caller does).
func (d *Deployer) pull(ctx context.Context, w *controlplane.Work, image string, built bool, log func(string)) error {
	if built {
		if _, err := d.cli.ImageInspect(ctx, image); err == nil {
			return nil
		}
	}
	if _, err := reference.ParseNormalizedNamed(image); err != nil {
		return deploydb.Permanent(err)
	}
	var opts client.ImagePullOptions
	if d.o.Credentials != nil {
		c, err := d.o.Credentials(ctx, w, image)
		if err != nil {
			return fmt.Errorf("registry credentials: %w", err)
		}
		if c != nil {
			enc, err := authconfig.Encode(registry.AuthConfig{Username: c.Username, Password: c.Password, IdentityToken: c.IdentityToken})
			if err != nil {
				return err
			}
			opts.RegistryAuth = enc
		}
	}
	start := time.Now()
	wait := pullBackoff
	for attempt := 1; ; attempt++ {
		err := d.pullOnce(ctx, image, opts)
		if err == nil || ctx.Err() != nil {
			return err
		}
		if finalPullError(err) {
			return deploydb.Permanent(err)
		}
		next := time.Now().Add(wait)
		if dl, ok := ctx.Deadline(); next.Sub(start) > d.o.PullRetryTimeout || ok && next.After(dl) {
			return fmt.Errorf("%w (gave up after %d attempts in %s)", err, attempt, time.Since(start).Round(time.Second))
		}
		log(fmt.Sprintf("pulling %s failed (attempt %d; retrying in %s): %v", image, attempt, wait, err))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, pullBackoffMax)
	}
}

// pullOnce is one attempt of a pull: the request and its progress stream.
func (d *Deployer) pullOnce(ctx context.Context, image string, opts client.ImagePullOptions) error {
	resp, err := d.cli.ImagePull(ctx, image, opts)
	if err != nil {
		return err
	}
	defer resp.Close()
	return resp.Wait(ctx)
}

// finalPullMessages are parts of the daemon's pull errors that no retry
// cures: the image, its tag or its repository does not exist, the
// credentials are missing or refused, the registry's name does not
// resolve, the image has no variant for the daemon's platform. The daemon
// reports some of them as internal errors (status 500), so their text is
// all that tells them apart.
var finalPullMessages = []string{
	"not found", "manifest unknown", "name unknown", "repository does not exist", "pull access denied",
	"unauthorized", "authentication required", "no basic auth credentials", "access denied", "denied:",
	"forbidden", "no such host", "invalid reference format", "no matching manifest",
}

// finalPullError reports whether a pull error is final (the answer will
// not change by trying again: see finalPullMessages, and the daemon's
// not-found, unauthorized, forbidden and invalid-argument answers) rather
// than transient (the daemon unreachable or busy, the registry
// unavailable or rate-limiting, a network error, or anything else).
func finalPullError(err error) bool {
	switch {
	case client.IsErrConnectionFailed(err), cerrdefs.IsUnavailable(err), cerrdefs.IsResourceExhausted(err),
		errors.Is(err, context.DeadlineExceeded):
		return false
	case cerrdefs.IsNotFound(err), cerrdefs.IsUnauthorized(err), cerrdefs.IsPermissionDenied(err), cerrdefs.IsInvalidArgument(err):
		return true
	}
	msg := strings.ToLower(err.Error())
	for _, m := range finalPullMessages {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// filter lists the containers of this instance with the given labels
// (key=value), in every state.
func (d *Deployer) list(ctx context.Context, labels ...string) ([]container.Summary, error) {
	f := make(client.Filters).Add("label", LabelInstance+"="+d.o.Instance)
	for _, l := range labels {
		f.Add("label", l)
	}
	res, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, err
	}
	return res.Items, nil
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9_.-]`)

// containerName is a replica's name: deterministic, so that a Deploy
// resumed after a crash finds (or collides with) the container an earlier
// one created instead of making a second.
func (d *Deployer) containerName(revision string, replica int) string {
	return fmt.Sprintf("dp-%s-%s-%d", unsafeName.ReplaceAllString(d.o.Instance, "_"), revision, replica)
}

// replicas is the number of containers of a revision: min_scale, at least 1.
func replicas(spec *controlplane.ResourceSpec) int {
	if spec != nil && spec.MinScale != nil && *spec.MinScale > 1 {
		return int(min(*spec.MinScale, 1000))
	}
	return 1
}

// resources maps the defaulted resource_spec onto Docker's limits: cpu is
// a relative weight (1024 shares per CPU), cpu_limit a hard quota,
// memory_mb a soft reservation, memory_limit_mb the hard limit. A field
// left null (with no default from ResourceSpec.WithDefaults) sets no limit.
func resources(spec *controlplane.ResourceSpec) container.Resources {
	var r container.Resources
	if spec == nil {
		return r
	}
	s := spec.WithDefaults()
	if s.CPU != nil {
		r.CPUShares = max(2, int64(math.Round(*s.CPU*1024)))
	}
	if s.CPULimit != nil {
		r.NanoCPUs = int64(math.Round(*s.CPULimit * 1e9))
	}
	if s.MemoryMB != nil {
		r.MemoryReservation = *s.MemoryMB << 20
	}
	if s.MemoryLimitMB != nil {
		r.Memory = *s.MemoryLimitMB << 20
	}
	return r
}

// labelsOf are a replica's labels: the resource_spec's, then ours (which
// win).
func (d *Deployer) labelsOf(w *controlplane.Work, replica, port int) map[string]string {
	l := map[string]string{}
	if w.ResourceSpec != nil {
		for k, v := range w.ResourceSpec.Labels {
			l[k] = v
		}
	}
	l[LabelInstance] = d.o.Instance
	l[LabelTenant] = w.Tenant
	l[LabelDeployment] = w.Deployment.ID
	l[LabelRevision] = w.Revision.ID
	l[LabelRevisionCreated] = strconv.FormatInt(w.Revision.CreatedAt.Time().UnixMicro(), 10)
	l[LabelReplica] = strconv.Itoa(replica)
	l[LabelRole] = RoleServer
	l[LabelPort] = strconv.Itoa(port)
	return l
}

// prepareContainers makes the revision's replicas exist, not yet
// started: it finds the ones an earlier Deploy created (after a restart),
// creates the missing ones, and removes any beyond min_scale. It writes
// no log line, so that it may run while the image is pulled
// (startContainers says what it did). early says that it does: the
// containers it creates are checked against the pulled image before they
// start.
func (d *Deployer) prepareContainers(ctx context.Context, w *controlplane.Work, image string, extraEnv []string, early bool) ([]*ctr, error) {
	n := replicas(w.ResourceSpec)
	have, err := d.list(ctx, LabelDeployment+"="+w.Deployment.ID, LabelRevision+"="+w.Revision.ID)
	if err != nil {
		return nil, fmt.Errorf("listing containers: %w", err)
	}
	byReplica := map[int]container.Summary{}
	for _, c := range have {
		i, err := strconv.Atoi(c.Labels[LabelReplica])
		if err != nil || i >= n {
			if err := d.remove(ctx, c.ID, false); err != nil {
				return nil, err
			}
			continue
		}
		byReplica[i] = c
	}
	out := make([]*ctr, 0, n)
	for i := range n {
		var c *ctr
		if s, ok := byReplica[i]; ok {
			c, err = d.inspectCtr(ctx, s.ID)
			if c != nil {
				c.adopted = true
			}
		} else {
			c, err = d.create(ctx, w, image, i, extraEnv)
			if c != nil && !c.adopted {
				c.early = early
			}
		}
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// startContainers starts the prepared replicas that are not running yet,
// all at once, once what was done is in the deploy log (one write, before
// the starts, of what an early making did not write: a crash after them
// leaves the log complete). A replica
// created before the pull ended (early), or by an earlier Deploy and
// never started, runs only the image the pull left under the reference
// (pulled, its ID, when the caller knows it): one made from another (the
// tag moved) is removed and created again. It returns the containers to
// wait for, in replica order.
func (x *run) startContainers(ctx context.Context, image, pulled string, cs []*ctr, extraEnv []string) ([]*ctr, error) {
	d, w := x.d, x.w
	var lines []string
	for i, c := range cs {
		if !c.created || !(c.early || c.adopted) {
			continue
		}
		if pulled == "" {
			res, err := d.cli.ImageInspect(ctx, image)
			if err != nil {
				return nil, fmt.Errorf("inspecting image %s: %w", image, err)
			}
			pulled = res.ID
		}
		if c.image == pulled {
			continue
		}
		if err := d.remove(ctx, c.id, false); err != nil {
			return nil, err
		}
		nc, err := d.create(ctx, w, image, c.replica, extraEnv)
		if err != nil {
			return nil, err
		}
		lines = append(lines, fmt.Sprintf("container %s was created from what %s named before the pull; created it again from the pulled image", c.name, image))
		cs[i] = nc
	}
	var unlogged []*ctr
	for _, c := range cs {
		if !c.logged {
			unlogged = append(unlogged, c)
		}
	}
	if lines = append(lines, containerLines(unlogged)...); len(lines) > 0 {
		d.logLines(ctx, w, append([]string{"starting the revision's containers"}, lines...)...)
	}
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		if !c.created {
			continue
		}
		wg.Go(func() {
			if _, err := d.cli.ContainerStart(ctx, c.id, client.ContainerStartOptions{}); err != nil {
				errs[i] = fmt.Errorf("starting container %s: %w", c.name, err)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return cs, nil
}

// containerLines are the deploy log's lines for prepared containers.
func containerLines(cs []*ctr) []string {
	lines := make([]string, 0, len(cs))
	for _, c := range cs {
		if c.adopted {
			lines = append(lines, "adopting container "+c.name)
		} else {
			lines = append(lines, fmt.Sprintf("created container %s (port %d)", c.name, c.port))
		}
	}
	return lines
}

func firstName(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

// inspectCtr inspects a container of a revision: its replica, address,
// state and image.
func (d *Deployer) inspectCtr(ctx context.Context, id string) (*ctr, error) {
	res, err := d.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("inspecting container %s: %w", id, err)
	}
	c, err := d.ctrOf(res.Container)
	if err != nil {
		return nil, err
	}
	c.created = res.Container.State != nil && res.Container.State.Status == container.StateCreated
	c.image = res.Container.Image
	return c, nil
}

// ctrOf reads a container's replica and address from its labels and
// network settings.
func (d *Deployer) ctrOf(ci container.InspectResponse) (*ctr, error) {
	name := strings.TrimPrefix(ci.Name, "/")
	var labels map[string]string
	if ci.Config != nil {
		labels = ci.Config.Labels
	}
	port, err := strconv.Atoi(labels[LabelPort])
	if err != nil {
		return nil, fmt.Errorf("container %s has no port label", name)
	}
	replica, _ := strconv.Atoi(labels[LabelReplica])
	c := &ctr{id: ci.ID, name: name, replica: replica, port: port}
	if d.o.Network == "host" {
		c.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		return c, nil
	}
	if ci.NetworkSettings != nil {
		if ep := ci.NetworkSettings.Networks[d.o.Network]; ep != nil && ep.IPAddress.IsValid() {
			c.addr = net.JoinHostPort(ep.IPAddress.String(), strconv.Itoa(port))
			return c, nil
		}
	}
	// Not running (yet): the health check reports what happened to it.
	return c, nil
}

// create creates replica i of the revision, not started. Creation is
// serialized with Teardown per deployment, so a deployment being deleted
// gets no new container.
func (d *Deployer) create(ctx context.Context, w *controlplane.Work, image string, replica int, extraEnv []string) (*ctr, error) {
	refs, err := d.secretRefEnv(w.SecretReferences)
	if err != nil {
		return nil, err
	}
	port := d.o.ServerPort
	if d.o.Network == "host" {
		p, err := d.ports.take(ctx, d)
		if err != nil {
			return nil, err
		}
		port = p
	}
	env := make([]string, 0, len(w.Secrets)+len(refs)+1)
	for _, s := range w.Secrets {
		if s.Name != d.o.PortEnv {
			env = append(env, s.Name+"="+s.Value)
		}
	}
	env = append(env, refs...)
	env = append(env, extraEnv...)
	env = append(env, d.o.PortEnv+"="+strconv.Itoa(port))
	name := d.containerName(w.Revision.ID, replica)
	opts := client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{
			Image:  image,
			Env:    env,
			Labels: d.labelsOf(w, replica, port),
		},
		HostConfig: &container.HostConfig{
			NetworkMode:   container.NetworkMode(d.o.Network),
			RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyUnlessStopped},
			Resources:     resources(w.ResourceSpec),
		},
	}
	mu := d.lock(w.Tenant, w.Deployment.ID)
	mu.Lock()
	if d.isRemoved(w.Tenant, w.Deployment.ID) {
		mu.Unlock()
		return nil, errTornDown
	}
	res, err := d.cli.ContainerCreate(ctx, opts)
	mu.Unlock()
	if cerrdefs.IsConflict(err) {
		// A container of that name exists: an earlier Deploy of this
		// revision made it after our listing. Adopt it.
		c, err := d.inspectCtr(ctx, name)
		if c != nil {
			c.adopted = true
		}
		return c, err
	}
	if err != nil {
		return nil, fmt.Errorf("creating container %s: %w", name, err)
	}
	// Its image's ID tells whether it runs what the pull left under the
	// reference (startContainers).
	return d.inspectCtr(ctx, res.ID)
}

func (d *Deployer) isRemoved(tenant, dep string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.removed[depKey(tenant, dep)]
}

// waitHealthy runs the container's health check (GET Options.HealthPath)
// until it answers 200: soon after a failure at first, then every
// Options.HealthInterval (deploydb.Wait's backoff). An answer that will
// not change fails at once: the container exited (or restarted) or was
// removed, or the server answered a final 4xx (see healthAnswerFinal).
// Anything else (no answer yet, 5xx) is waited out until
// Options.HealthTimeout. The wait writes nothing to the deploy log: the
// container's output goes there meanwhile, and a line of the Deployer's
// written before that output is would make an adopting Deploy (after a
// restart) skip it (see resumeFrom).
func (d *Deployer) waitHealthy(ctx context.Context, c *ctr) error {
	hctx, cancel := context.WithTimeout(ctx, d.o.HealthTimeout)
	defer cancel()
	last := "no answer yet"
	var final error
	err := deploydb.Wait(hctx, d.o.HealthInterval, nil, deploydb.Check{
		What: fmt.Sprintf("container %s (GET %s)", c.name, d.o.HealthPath),
		Check: func(ctx context.Context) error {
			err := d.healthCheck(ctx, c)
			switch {
			case errors.Is(err, deploydb.ErrPermanent):
				final = err
			case err != nil && ctx.Err() == nil:
				last = err.Error()
			}
			return err
		},
	})
	switch {
	case err == nil:
		return nil
	case final != nil:
		return final
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return fmt.Errorf("container %s did not answer its health check (GET %s) within %s: %s",
		c.name, d.o.HealthPath, d.o.HealthTimeout, last)
}

// healthCheck is one check of a revision's container: nil when it
// answers 200, an error marked deploydb.Permanent when it will not. Its
// state is inspected and its health path asked at once when its address
// is known; a state that says it exited or restarted wins over the answer.
func (d *Deployer) healthCheck(ctx context.Context, c *ctr) error {
	var answer chan error
	if c.addr != "" {
		gctx, cancel := context.WithCancel(ctx)
		defer cancel() // ends the GET when the state decides
		answer = make(chan error, 1)
		addr := c.addr
		go func() { answer <- d.healthGet(gctx, c, addr) }()
	}
	res, err := d.cli.ContainerInspect(ctx, c.id, client.ContainerInspectOptions{})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return deploydb.Permanent(fmt.Errorf("container %s was removed while starting", c.name))
		}
		return fmt.Errorf("inspecting container %s: %w", c.name, err)
	}
	if st := res.Container.State; st != nil && (!st.Running || st.Restarting || res.Container.RestartCount > 0) {
		if st.Status != container.StateCreated {
			return deploydb.Permanent(d.exited(ctx, c, res.Container))
		}
	}
	if answer != nil {
		return <-answer
	}
	if nc, err := d.ctrOf(res.Container); err == nil {
		c.addr = nc.addr
	}
	if c.addr == "" {
		return errors.New("the container has no address yet")
	}
	return d.healthGet(ctx, c, c.addr)
}

// healthGet asks the container's health path at addr.
func (d *Deployer) healthGet(ctx context.Context, c *ctr, addr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+d.o.HealthPath, nil)
	if err != nil {
		return deploydb.Permanent(err)
	}
	resp, err := d.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the method and URL: the check names them
		}
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	if healthAnswerFinal(resp.StatusCode) {
		return deploydb.Permanent(fmt.Errorf("container %s: health check GET %s answered %s%s",
			c.name, d.o.HealthPath, resp.Status, bodyQuote(body)))
	}
	return fmt.Errorf("answered %s%s", resp.Status, bodyQuote(body))
}

// healthAnswerFinal reports whether a health check's status is final: a
// 4xx from a server that answers says it serves, but not the health path
// (404), or not to the check (401, 403, 405, ...), which will not change
// by waiting. 408, 425 and 429 ask to come back later, and 5xx (or 1xx,
// 2xx other than 200, 3xx a redirect did not resolve) may pass once the
// server has started: those are waited out.
func healthAnswerFinal(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests:
		return false
	}
	return status >= 400 && status < 500
}

// bodyQuote is the first line of an answer's body, quoted and short, for
// an error message; "" for an empty body.
func bodyQuote(b []byte) string {
	line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	line = strings.TrimSpace(line)
	if line == "" || !utf8.ValidString(line) {
		return ""
	}
	if len(line) > 200 {
		line = line[:200] + "..."
	}
	return fmt.Sprintf(" (%q)", line)
}

// exited describes a container that stopped or crashed, with its exit
// code and the end of its output. A stopped or restarting container's
// state has its exit code; one running again after a restart has not, and
// the daemon's last "die" event of it has.
func (d *Deployer) exited(ctx context.Context, c *ctr, ci container.InspectResponse) error {
	st := ci.State
	code, known := st.ExitCode, !st.Running || st.Restarting
	if !known {
		code, known = d.lastExitCode(ctx, c.id, ci)
	}
	why := "exited"
	if known {
		why = fmt.Sprintf("exited with code %d", code)
	}
	if st.OOMKilled {
		why += " (out of memory)"
	}
	switch {
	case ci.RestartCount > 0:
		why += fmt.Sprintf(" and was restarted %d time(s)", ci.RestartCount)
	case st.Restarting:
		why += " and is restarting"
	}
	msg := fmt.Sprintf("container %s %s", c.name, why)
	if tail := d.tail(ctx, c.id); tail != "" {
		msg += "; its last output: " + tail
	}
	return errors.New(msg)
}

// lastExitCode is the exit code of the container's last "die" event
// before its last start: the events from its creation to then, both in
// the daemon's clock.
func (d *Deployer) lastExitCode(ctx context.Context, id string, ci container.InspectResponse) (int, bool) {
	if ci.Created == "" || ci.State == nil || ci.State.StartedAt == "" {
		return 0, false
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res := d.cli.Events(ctx, client.EventsListOptions{
		Since: ci.Created, Until: ci.State.StartedAt,
		Filters: make(client.Filters).Add("type", "container").Add("container", id).Add("event", "die"),
	})
	code, known := 0, false
	for {
		select {
		case m := <-res.Messages:
			if n, err := strconv.Atoi(m.Actor.Attributes["exitCode"]); err == nil {
				code, known = n, true
			}
		case <-res.Err:
			return code, known
		}
	}
}

// tail returns the last lines of a container's output, on one line.
func (d *Deployer) tail(ctx context.Context, id string) string {
	rc, err := d.cli.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "5"})
	if err != nil {
		return ""
	}
	defer rc.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, io.LimitReader(rc, 8<<10)); err != nil && out.Len() == 0 {
		return ""
	}
	lines := strings.Fields(strings.ReplaceAll(strings.TrimSpace(out.String()), "\n", " | "))
	return strings.Join(lines, " ")
}

// remove removes a container (stopping it gracefully first when graceful).
// A container already gone is not an error.
func (d *Deployer) remove(ctx context.Context, id string, graceful bool) error {
	if graceful {
		secs := int(d.o.StopTimeout / time.Second)
		if _, err := d.cli.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &secs}); err != nil && !cerrdefs.IsNotFound(err) {
			d.log.Warn("deploydocker: stopping a container", "container", id, "err", err)
		}
	}
	_, err := d.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	if err != nil && !cerrdefs.IsNotFound(err) && !isRemovalInProgress(err) {
		return fmt.Errorf("removing container %s: %w", id, err)
	}
	return nil
}

func isRemovalInProgress(err error) bool {
	return strings.Contains(err.Error(), "is already in progress")
}

// removeRevision removes every container of one revision.
func (d *Deployer) removeRevision(ctx context.Context, tenant, dep, rev string) error {
	cs, err := d.list(ctx, LabelTenant+"="+tenant, LabelDeployment+"="+dep, LabelRevision+"="+rev)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range cs {
		errs = append(errs, d.remove(ctx, c.ID, false))
	}
	return errors.Join(errs...)
}

// removeOlder stops and removes the containers of the deployment's
// revisions created before w's (the one it replaced, and any older one
// still starting). Newer revisions' containers are left alone.
func (d *Deployer) removeOlder(ctx context.Context, w *controlplane.Work) error {
	cs, err := d.list(ctx, LabelTenant+"="+w.Tenant, LabelDeployment+"="+w.Deployment.ID)
	if err != nil {
		return err
	}
	mine := w.Revision.CreatedAt.Time().UnixMicro()
	var errs []error
	var wg sync.WaitGroup
	var mu sync.Mutex
	removed := 0
	for _, c := range cs {
		if c.Labels[LabelRevision] == w.Revision.ID || isService(c.Labels) {
			continue
		}
		created, err := strconv.ParseInt(c.Labels[LabelRevisionCreated], 10, 64)
		if err == nil && (created > mine || (created == mine && c.Labels[LabelRevision] > w.Revision.ID)) {
			continue
		}
		removed++
		wg.Go(func() {
			err := d.remove(ctx, c.ID, true)
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	if removed > 0 {
		d.logLine(ctx, w, controlplane.LogDeploy, controlplane.LevelInfo, fmt.Sprintf("removed %d container(s) of older revisions", removed))
	}
	return errors.Join(errs...)
}

// Teardown removes every container of a deployment being deleted, and its
// route in the proxy. It implements controlplane.Deployer; it is
// idempotent, and once it returns no container of the deployment is left
// or will be created by this process.
func (d *Deployer) Teardown(ctx context.Context, tenant string, dep *controlplane.Deployment) error {
	mu := d.lock(tenant, dep.ID)
	mu.Lock()
	defer mu.Unlock()
	d.mu.Lock()
	d.removed[depKey(tenant, dep.ID)] = true
	d.mu.Unlock()
	d.proxy.remove(dep.ID)
	cs, err := d.list(ctx, LabelTenant+"="+tenant, LabelDeployment+"="+dep.ID)
	if err != nil {
		return fmt.Errorf("deploydocker: listing containers: %w", err)
	}
	var errs []error
	for _, c := range cs {
		errs = append(errs, d.remove(ctx, c.ID, false))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("deploydocker: teardown of %s: %w", dep.ID, err)
	}
	// The deployment's database and Redis go with it, data and all.
	if d.dbs != nil {
		if err := d.dbs.Remove(ctx, tenant, dep.ID); err != nil {
			return fmt.Errorf("deploydocker: teardown of %s: removing its database: %w", dep.ID, err)
		}
	}
	// The images built for the deployment go with it.
	if ir, ok := d.o.Builder.(ImageRemover); ok {
		if err := ir.RemoveImages(ctx, tenant, dep.ID); err != nil {
			return fmt.Errorf("deploydocker: teardown of %s: %w", dep.ID, err)
		}
	}
	return nil
}

// ports hands out host ports to containers on the host network.
type ports struct {
	mu          sync.Mutex
	first, last int
	next        int
	reserved    map[int]time.Time // handed out recently; the container may not exist yet
}

// take returns a port in the range that no container of any instance is
// labelled with, that nothing listens on, and that was not handed out in
// the last minute.
func (p *ports) take(ctx context.Context, d *Deployer) (int, error) {
	f := make(client.Filters).Add("label", LabelPort)
	res, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return 0, fmt.Errorf("listing containers: %w", err)
	}
	used := map[int]bool{}
	for _, c := range res.Items {
		if n, err := strconv.Atoi(c.Labels[LabelPort]); err == nil {
			used[n] = true
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reserved == nil {
		p.reserved = map[int]time.Time{}
	}
	now := time.Now()
	for port, at := range p.reserved {
		if now.Sub(at) > time.Minute {
			delete(p.reserved, port)
		}
	}
	size := p.last - p.first + 1
	for range size {
		port := p.next
		p.next++
		if p.next > p.last {
			p.next = p.first
		}
		if used[port] || !p.reserved[port].IsZero() || !free(port) {
			continue
		}
		p.reserved[port] = now
		return port, nil
	}
	return 0, fmt.Errorf("no free port in %d..%d", p.first, p.last)
}

// free reports whether nothing listens on port (on any address).
func free(port int) bool {
	l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// sortByReplica orders containers by replica index.
func sortByReplica(cs []*ctr) {
	sort.Slice(cs, func(i, j int) bool { return cs[i].replica < cs[j].replica })
}

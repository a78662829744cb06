package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/deployplane/deployplane/apierr"
	cp "github.com/deployplane/deployplane/controlplane"
	"github.com/google/uuid"
)

// listPageSize is the number of deployments a page of the list shows.
const listPageSize = 25

// deploymentRow is one deployment of the list, its values formatted
// beforehand (the template only places them).
type deploymentRow struct {
	ID, Name, DisplayName, Status, Badge, Source, Image, CreatedISO, Created string
}

// rowsOf formats the list's rows.
func rowsOf(deps []cp.Deployment) []deploymentRow {
	rows := make([]deploymentRow, len(deps))
	for i := range deps {
		d := &deps[i]
		r := &rows[i]
		r.ID, r.Name, r.Status, r.Badge, r.Source = d.ID, d.Name, string(d.Status), badgeClass(d.Status), string(d.Source)
		if d.DisplayName != nil {
			r.DisplayName = *d.DisplayName
		}
		if t := d.SourceConfig.DeploymentType; t != nil {
			r.Source += " · " + string(*t)
		}
		if d.SourceRevisionConfig.ImageURI != nil {
			r.Image = *d.SourceRevisionConfig.ImageURI
		}
		at := d.CreatedAt.Time().UTC()
		r.CreatedISO, r.Created = at.Format(time.RFC3339Nano), at.Format(timeLayout)
	}
	return rows
}

// deploymentsData is the deployments page's.
type deploymentsData struct {
	Rows        []deploymentRow
	Deployments []cp.Deployment
	Listeners   []cp.Listener
	Statuses    []cp.DeploymentStatus
	Types       []cp.DeploymentType
	Prev, Next  string // links to the neighbouring pages ("" for none)
	Offset      int
}

// deploymentsPage serves GET /ui/deployments: newest first, filtered by
// name, status, type and listener, a page at a time.
func (h *Handler) deploymentsPage(q *request) error {
	in := q.r.URL.Query()
	f := &form{Values: in, Action: "filter"}
	lq := &cp.ListDeploymentsQuery{
		NameContains:   in.Get("name"),
		Status:         cp.DeploymentStatus(in.Get("status")),
		DeploymentType: cp.DeploymentType(in.Get("type")),
	}
	if o := in.Get("offset"); o != "" {
		n, err := strconv.Atoi(o)
		if err != nil || n < 0 {
			f.add("", "The page offset is not valid; showing the first page.")
		} else {
			lq.Offset = n
		}
	}
	listener := strings.ToLower(in.Get("listener"))
	if listener != "" {
		if _, err := uuid.Parse(listener); err != nil || len(listener) != 36 {
			f.add("listener", "Choose a listener from the list.")
		}
		lq.ListenerID = listener
	}
	d := deploymentsData{Offset: lq.Offset, Statuses: cp.DeploymentStatuses(), Types: cp.DeploymentTypes()}
	ls, err := h.cp.ListListeners(q.r.Context(), q.tenant(), &cp.ListListenersQuery{Limit: new(cp.MaxPageLimit)})
	if err != nil {
		return err
	}
	d.Listeners = ls.Resources
	status := http.StatusOK
	if !f.failed() {
		next := -1
		lq.Limit = new(listPageSize)
		page, err := h.cp.ListDeployments(q.r.Context(), q.tenant(), lq)
		if err == nil {
			d.Deployments = page.Resources
			if len(page.Resources) == listPageSize {
				next = page.Offset
			}
		}
		var ve *apierr.ValidationError
		switch {
		case errors.As(err, &ve):
			f.fromValidation(ve, map[string]string{"name_contains": "name", "status": "status", "deployment_type": "type", "listener_id": "listener", "offset": ""})
			status = http.StatusUnprocessableEntity
		case err != nil:
			return err
		}
		if next >= 0 {
			d.Next = h.listLink(in, next)
		}
		if lq.Offset > 0 {
			d.Prev = h.listLink(in, max(0, lq.Offset-listPageSize))
		}
	} else {
		status = http.StatusUnprocessableEntity
	}
	d.Rows = rowsOf(d.Deployments)
	ids := make([]string, len(d.Deployments))
	for i, dep := range d.Deployments {
		ids[i] = dep.ID
	}
	h.render(q.w, status, "deployments", &view{Title: "Deployments", Sess: q.sess, Nav: "deployments",
		Live: h.base + "/stream/events?ids=" + strings.Join(ids, ","), Data: d, Form: f})
	return nil
}

// listLink is the deployments page with in's filters at offset.
func (h *Handler) listLink(in url.Values, offset int) string {
	v := url.Values{}
	for _, k := range []string{"name", "status", "type", "listener"} {
		if s := in.Get(k); s != "" {
			v.Set(k, s)
		}
	}
	if offset > 0 {
		v.Set("offset", strconv.Itoa(offset))
	}
	if len(v) == 0 {
		return h.base + "/deployments"
	}
	return h.base + "/deployments?" + v.Encode()
}

// specRow is one field of a resource spec as the deployment page shows it.
type specRow struct {
	Name    string
	Value   string
	Default bool // the value is a default (WithDefaults), not what the client set
}

// deploymentData is the deployment page's.
type deploymentData struct {
	D           *cp.Deployment
	SecretNames []string
	Listener    *cp.Listener
	Namespace   string
	Spec        []specRow
	SpecInput   map[string]string // the stored values of the editable spec fields
	Revisions   []cp.Revision
	RevNext     string
	HasImage    bool
	SpecFields  []string
}

// editableSpec are the resource spec fields the deployment page's form
// edits (the others are kept as they are).
var editableSpec = []string{"min_scale", "max_scale", "cpu", "cpu_limit", "memory_mb", "memory_limit_mb"}

// deploymentPage serves GET /ui/deployments/{id}.
func (h *Handler) deploymentPage(q *request) error {
	return h.showDeployment(q, http.StatusOK, nil)
}

// showDeployment renders the deployment page, with the problems of a form
// of it when f is not nil.
func (h *Handler) showDeployment(q *request, status int, f *form) error {
	ctx := q.r.Context()
	id := q.r.PathValue("id")
	dep, err := h.cp.GetDeployment(ctx, q.tenant(), id)
	if err != nil {
		return err
	}
	d := deploymentData{D: dep, HasImage: dep.Source != cp.SourceGitHub, SpecFields: editableSpec}
	for _, s := range dep.Secrets {
		d.SecretNames = append(d.SecretNames, s.Name)
	}
	if lid := dep.SourceConfig.ListenerID; lid != nil {
		l, err := h.cp.GetListener(ctx, q.tenant(), *lid)
		switch {
		case err == nil:
			d.Listener = l
		case !errors.Is(err, apierr.ErrNotFound):
			return err
		}
		d.Namespace = "default"
		if lc := dep.SourceConfig.ListenerConfig; lc != nil && lc.K8sNamespace != nil {
			d.Namespace = *lc.K8sNamespace
		} else if l != nil && len(l.ComputeConfig.K8sNamespaces) > 0 {
			d.Namespace = l.ComputeConfig.K8sNamespaces[0]
		}
	}
	var stored cp.ResourceSpec
	if dep.SourceConfig.ResourceSpec != nil {
		stored = *dep.SourceConfig.ResourceSpec
	}
	d.Spec = specRows(stored, stored.WithDefaults())
	d.SpecInput = map[string]string{}
	for _, r := range specRows(stored, stored) {
		d.SpecInput[r.Name] = r.Value
	}
	off := 0
	if o, err := strconv.Atoi(q.r.URL.Query().Get("rev_offset")); err == nil && o > 0 {
		off = o
	}
	revs, err := h.cp.ListRevisions(ctx, q.tenant(), id, &cp.ListRevisionsQuery{Limit: new(listPageSize), Offset: off})
	if err != nil {
		return err
	}
	d.Revisions = revs.Resources
	if len(revs.Resources) == listPageSize {
		d.RevNext = fmt.Sprintf("%s/deployments/%s?rev_offset=%d", h.base, url.PathEscape(id), revs.Offset)
	}
	title := dep.Name
	h.render(q.w, status, "deployment", &view{Title: title, Sess: q.sess, Nav: "deployments",
		Live: h.base + "/stream/events?deployment=" + url.QueryEscape(dep.ID), Data: d, Form: f})
	return nil
}

// specRows lists the fields of spec that have a value, by their JSON
// names, marking those that stored lacks (defaults).
func specRows(stored, spec cp.ResourceSpec) []specRow {
	var rows []specRow
	sv, dv := reflect.ValueOf(stored), reflect.ValueOf(spec)
	t := dv.Type()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		v := dv.Field(i)
		if v.IsZero() {
			continue
		}
		var s string
		switch v.Kind() {
		case reflect.Pointer:
			s = fmt.Sprint(v.Elem().Interface())
		default:
			b, err := json.Marshal(v.Interface())
			if err != nil {
				continue
			}
			s = string(b)
		}
		rows = append(rows, specRow{Name: name, Value: s, Default: sv.Field(i).IsZero()})
	}
	return rows
}

// timelineStep is one status of a revision's history and how long the
// revision stayed in it.
type timelineStep struct {
	cp.StatusChange
	Took    string // the time until the next status ("" for the last)
	Millis  int64  // the same, for the bar
	Current bool   // the revision is still in it
}

// revisionData is the revision page's.
type revisionData struct {
	D        *cp.Deployment
	R        *cp.Revision
	Timeline []timelineStep
	Total    int64 // milliseconds from the first status to the last
	Log      cp.LogType
	Level    string
	Query    string
	Lines    []cp.LogEntry
	After    string // the log offset after the last line shown
	Full     bool   // more lines follow (the page is full): no live follow
	FirstErr string // the id of the first ERROR or CRITICAL line shown
	Levels   []cp.LogLevel
}

// maxLogLines is the most log lines a revision page shows.
const maxLogLines = 1000

// revisionPage serves GET /ui/deployments/{id}/revisions/{rid}: the
// revision, its status history as a timeline, and one of its logs.
func (h *Handler) revisionPage(q *request) error {
	ctx := q.r.Context()
	id, rid := q.r.PathValue("id"), q.r.PathValue("rid")
	dep, err := h.cp.GetDeployment(ctx, q.tenant(), id)
	if err != nil {
		return err
	}
	rev, err := h.cp.GetRevision(ctx, q.tenant(), id, rid)
	if err != nil {
		return err
	}
	in := q.r.URL.Query()
	d := revisionData{D: dep, R: rev, Log: cp.LogDeploy, Level: strings.ToUpper(in.Get("level")), Query: in.Get("q"),
		Levels: []cp.LogLevel{cp.LogLevel("DEBUG"), cp.LogLevel("INFO"), cp.LogLevel("WARNING"), cp.LogLevel("ERROR"), cp.LogLevel("CRITICAL")}}
	if in.Get("log") == string(cp.LogBuild) {
		d.Log = cp.LogBuild
	}
	d.Timeline, d.Total = timeline(rev.StatusHistory)
	f := &form{Values: in, Action: "logs"}
	status := http.StatusOK
	page, err := h.cp.ListLogs(ctx, q.tenant(), id, rid, &cp.LogQuery{Type: d.Log, Limit: new(maxLogLines), Level: d.Level,
		Query: d.Query, Offset: in.Get("after")})
	var ve *apierr.ValidationError
	switch {
	case errors.As(err, &ve):
		f.fromValidation(ve, map[string]string{"level": "level", "query": "q", "offset": ""})
		status = http.StatusUnprocessableEntity
	case err != nil:
		return err
	default:
		d.Lines = page.Logs
		if page.NextOffset != nil {
			d.After = *page.NextOffset
		} else {
			d.After = in.Get("after")
		}
		d.Full = len(page.Logs) == maxLogLines
		for _, l := range page.Logs {
			if l.Level == "ERROR" || l.Level == "CRITICAL" {
				d.FirstErr = l.ID
				break
			}
		}
	}
	live := ""
	if !d.Full && status == http.StatusOK {
		v := url.Values{"type": {string(d.Log)}, "after": {d.After}, "level": {d.Level}, "q": {d.Query}}
		live = fmt.Sprintf("%s/stream/logs/%s/%s?%s", h.base, url.PathEscape(id), url.PathEscape(rid), v.Encode())
	}
	h.render(q.w, status, "revision", &view{Title: "Revision " + rev.ID, Sess: q.sess, Nav: "deployments",
		Live: live, Data: d, Form: f})
	return nil
}

// rollbackData is the rollback page's: the deployment, the revision it
// would go back to, and what changes.
type rollbackData struct {
	D       *cp.Deployment
	R       *cp.Revision
	Changes []rollbackChange
}

// rollbackChange is a field a rollback changes: its value now (the
// active revision's) and after.
type rollbackChange struct {
	Field, Now, After string
}

// rollbackPage serves GET /ui/deployments/{id}/revisions/{rid}/rollback:
// what going back to the revision changes, before the button that does it.
func (h *Handler) rollbackPage(q *request) error {
	ctx := q.r.Context()
	id, rid := q.r.PathValue("id"), q.r.PathValue("rid")
	dep, err := h.cp.GetDeployment(ctx, q.tenant(), id)
	if err != nil {
		return err
	}
	target, err := h.cp.GetRevision(ctx, q.tenant(), id, rid)
	if err != nil {
		return err
	}
	var active *cp.Revision
	if dep.ActiveRevisionID != nil {
		if active, err = h.cp.GetRevision(ctx, q.tenant(), id, *dep.ActiveRevisionID); err != nil {
			return err
		}
	}
	d := rollbackData{D: dep, R: target, Changes: rollbackChanges(dep, active, target)}
	h.render(q.w, http.StatusOK, "rollback", &view{Title: "Roll back " + dep.Name, Sess: q.sess, Nav: "deployments", Data: d})
	return nil
}

// rollbackChanges lists the fields of the revisions' snapshots that
// differ between the active revision (nil: none) and target.
func rollbackChanges(dep *cp.Deployment, active, target *cp.Revision) []rollbackChange {
	var now cp.SourceRevisionConfig
	if active != nil {
		now = active.SourceRevisionConfig
	}
	after := target.SourceRevisionConfig
	var out []rollbackChange
	for _, f := range []struct {
		name     string
		now, aft *string
	}{
		{"revision", dep.ActiveRevisionID, &target.ID},
		{"image_uri", now.ImageURI, after.ImageURI},
		{"repo_ref", now.RepoRef, after.RepoRef},
		{"repo_commit_sha", now.RepoCommitSHA, after.RepoCommitSHA},
		{"graph_config_path", now.GraphConfigPath, after.GraphConfigPath},
		{"source_tarball_path", now.SourceTarballPath, after.SourceTarballPath},
	} {
		if str(f.now) != str(f.aft) {
			out = append(out, rollbackChange{Field: f.name, Now: str(f.now), After: str(f.aft)})
		}
	}
	return out
}

// timeline pairs each status of a history with the time until the next.
func timeline(hist []cp.StatusChange) ([]timelineStep, int64) {
	steps := make([]timelineStep, len(hist))
	var total int64
	for i, c := range hist {
		steps[i].StatusChange = c
		if i+1 < len(hist) {
			dur := hist[i+1].At.Time().Sub(c.At.Time())
			steps[i].Took = dur.Round(time.Millisecond).String()
			steps[i].Millis = dur.Milliseconds()
			total += steps[i].Millis
		} else {
			steps[i].Current = !cp.IsTerminal(c.Status)
		}
	}
	return steps, total
}

// listenersPage serves GET /ui/listeners.
func (h *Handler) listenersPage(q *request) error {
	off := 0
	if o, err := strconv.Atoi(q.r.URL.Query().Get("offset")); err == nil && o > 0 {
		off = o
	}
	page, err := h.cp.ListListeners(q.r.Context(), q.tenant(), &cp.ListListenersQuery{Limit: new(listPageSize), Offset: off})
	if err != nil {
		return err
	}
	next := ""
	if len(page.Resources) == listPageSize {
		next = fmt.Sprintf("%s/listeners?offset=%d", h.base, page.Offset)
	}
	h.render(q.w, http.StatusOK, "listeners", &view{Title: "Listeners", Sess: q.sess, Nav: "listeners",
		Data: struct {
			Listeners []cp.Listener
			Next      string
		}{page.Resources, next}})
	return nil
}

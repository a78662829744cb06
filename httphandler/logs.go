package httphandler

import (
	"net/http"

	"github.com/deployplane/deployplane/controlplane"
)

// The log routes (wire contract sections 9 and 11): the hosted API's GET
// .../revisions/{revision_id}/logs, and the POST routes langgraph-cli's
// `deploy logs` calls, whose project id is the deployment id. Each decodes
// the query or the body into a controlplane.LogQuery, which the
// ControlPlane validates (ListLogs), and answers its LogPage. GET
// /v2/deployment-logs decodes its query into a
// controlplane.DeploymentLogQuery (ListDeploymentLogs) and answers its
// DeploymentLogPage.

// logQueryParams documents the query of GET .../logs.
var logQueryParams = []param{
	qEnum("type", "The log: build or deploy.", "build", "deploy").must(),
	qEnum("order", "asc (oldest first) or desc.", "asc", "desc").with("asc"),
	qInt("limit", "Page size.", 1, controlplane.MaxLogLimit, controlplane.DefaultLogLimit),
	qStr("offset", "The next_offset of the previous page (opaque; a page of the same order)."),
	qStr("level", "Only lines of this level: DEBUG, INFO, WARNING, ERROR or CRITICAL (any case; WARN is WARNING)."),
	qStr("query", "Only lines whose message contains this, ignoring case."),
	qFormat("start_time", "RFC 3339; only lines at or after it.", "date-time"),
	qFormat("end_time", "RFC 3339; only lines before it.", "date-time"),
}

// parseLogQuery reads the query of GET .../logs.
func parseLogQuery(raw string) (*controlplane.LogQuery, error) {
	p := newQueryParser(raw)
	q := &controlplane.LogQuery{
		Type:      controlplane.LogType(p.str("type")),
		Order:     p.str("order"),
		Limit:     p.intp("limit"),
		Offset:    p.str("offset"),
		Level:     p.str("level"),
		Query:     p.str("query"),
		StartTime: p.str("start_time"),
		EndTime:   p.str("end_time"),
	}
	return q, p.done(func(controlplane.Limits) error { return q.Validate() }, controlplane.Limits{})
}

func (h *handler) revisionLogs(c *call) (int, any, error) {
	ids, pathErr := pathIDs(c.r, "deployment_id", "revision_id")
	q, qErr := parseLogQuery(c.r.URL.RawQuery)
	if pathErr != nil && qErr == nil {
		qErr = q.Validate() // list the query's problems with the path's
	}
	if err := joinProblems(pathErr, qErr); err != nil {
		return 0, nil, err
	}
	p, err := h.cp.ListLogs(c.r.Context(), c.tenant, ids[0], ids[1], q)
	return http.StatusOK, p, err
}

func (h *handler) projectBuildLogs(c *call) (int, any, error) {
	return h.projectLogs(c, controlplane.LogBuild, true)
}

func (h *handler) projectRevisionDeployLogs(c *call) (int, any, error) {
	return h.projectLogs(c, controlplane.LogDeploy, true)
}

func (h *handler) projectDeployLogs(c *call) (int, any, error) {
	return h.projectLogs(c, controlplane.LogDeploy, false)
}

// projectLogs serves langgraph-cli's POST routes: the body is the query
// (an absent body means the defaults); without a revision in the path,
// the deployment's latest revision is read.
func (h *handler) projectLogs(c *call, typ controlplane.LogType, withRevision bool) (int, any, error) {
	names := []string{"project_id"}
	if withRevision {
		names = append(names, "revision_id")
	}
	ids, pathErr := pathIDs(c.r, names...)
	q := &controlplane.LogQuery{}
	validate := func() error {
		q.Type, q.In = typ, "body"
		return q.Validate()
	}
	err := h.decodeChecked(c, q, true, nil, validate)
	if err == nil && pathErr != nil {
		err = validate() // list the body's problems with the path's
	}
	if err := joinProblems(pathErr, err); err != nil {
		return 0, nil, err
	}
	q.Type, q.In = typ, "body"
	rev := ""
	if withRevision {
		rev = ids[1]
	}
	p, err := h.cp.ListLogs(c.r.Context(), c.tenant, ids[0], rev, q)
	return http.StatusOK, p, err
}

// deploymentLogParams documents the query of GET /v2/deployment-logs, as
// the hosted service names it.
var deploymentLogParams = []param{
	qFormat("deployment_id", "The deployment whose logs to read.", "uuid").must(),
	qFormat("revision_id", "Only this revision's log; without it, every revision's in turn.", "uuid"),
	qEnum("log_type", "The log: BUILD or DEPLOY (any case).", "BUILD", "DEPLOY").with("DEPLOY"),
	qFormat("start_time", "RFC 3339; only lines at or after it.", "date-time"),
	qFormat("end_time", "RFC 3339; only lines before it.", "date-time"),
	qEnum("sort_order", "asc (oldest revision and line first) or desc.", "asc", "desc").with("asc"),
	qInt("page_size", "Page size.", 1, controlplane.MaxDeploymentLogPageSize, controlplane.DefaultDeploymentLogPageSize),
	qStr("cursor", "The next_cursor of the previous page (opaque; valid for the same tenant, deployment_id, revision_id, log_type and sort_order)."),
	qStr("query", "Only lines whose message contains this, ignoring case."),
	qStr("level", "Only lines of this level: DEBUG, INFO, WARNING, ERROR or CRITICAL (any case; WARN is WARNING)."),
}

// parseDeploymentLogQuery reads the query of GET /v2/deployment-logs for
// the tenant.
func parseDeploymentLogQuery(raw, tenant string) (*controlplane.DeploymentLogQuery, error) {
	p := newQueryParser(raw)
	q := &controlplane.DeploymentLogQuery{
		DeploymentID: p.str("deployment_id"),
		RevisionID:   p.str("revision_id"),
		LogType:      p.str("log_type"),
		SortOrder:    p.str("sort_order"),
		PageSize:     p.intp("page_size"),
		Cursor:       p.str("cursor"),
		Query:        p.str("query"),
		Level:        p.str("level"),
		StartTime:    p.str("start_time"),
		EndTime:      p.str("end_time"),
	}
	return q, p.done(func(controlplane.Limits) error { return q.Validate(tenant) }, controlplane.Limits{})
}

func (h *handler) deploymentLogs(c *call) (int, any, error) {
	q, err := parseDeploymentLogQuery(c.r.URL.RawQuery, c.tenant)
	if err != nil {
		return 0, nil, err
	}
	p, err := h.cp.ListDeploymentLogs(c.r.Context(), c.tenant, q)
	return http.StatusOK, p, err
}

package controlplane

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane/internal/revlog"
	"github.com/deployplane/deployplane/store"
)

// The deployment logs (GET /v2/deployment-logs, wire contract section
// 11): the build or deploy logs of every revision of a deployment, or of
// one, a page at a time from an opaque cursor.

// Defaults and bounds of DeploymentLogQuery.
const (
	DefaultDeploymentLogPageSize = 20
	MaxDeploymentLogPageSize     = 100
)

// DeploymentLogQuery is the query of ListDeploymentLogs: the parameters of
// GET /v2/deployment-logs, as the hosted service names them. Empty
// strings and nil mean the default; every problem is reported at
// ["query", name].
type DeploymentLogQuery struct {
	// DeploymentID is the deployment whose logs are read (required).
	DeploymentID string
	// RevisionID, when set, reads that revision's log alone; otherwise
	// the logs of every revision, oldest revision first (asc).
	RevisionID string
	// LogType is BUILD or DEPLOY (the default), in any case.
	LogType string
	// SortOrder is asc (the default: each log oldest line first, the
	// oldest revision's first) or desc (the reverse).
	SortOrder string
	// PageSize is 1..MaxDeploymentLogPageSize; nil means
	// DefaultDeploymentLogPageSize.
	PageSize *int
	// Cursor is the next_cursor of an earlier page of the same query (the
	// same tenant, deployment, revision, log type and order).
	Cursor string
	// Query keeps the lines whose message contains it, ignoring case.
	Query string
	// Level keeps the lines of that level only (any case; WARN is
	// WARNING).
	Level string
	// StartTime and EndTime (RFC 3339) keep the lines with StartTime <=
	// timestamp < EndTime.
	StartTime, EndTime string
}

// DeploymentLogPage is one page of ListDeploymentLogs. Items is never nil;
// each item is a LogEntry as the per-revision log routes answer it (its id
// names its revision, its log and its place). NextCursor is the cursor of
// the next page, or nil when the page reached the end of the logs.
type DeploymentLogPage struct {
	Items      []LogEntry `json:"items"`
	NextCursor *string    `json:"next_cursor"`
}

// deploymentLogWalk is a validated DeploymentLogQuery.
type deploymentLogWalk struct {
	deployment, revision string
	typ                  LogType
	revlog.Filter
	after *revlog.Place
}

// Validate reports every bad value of q, for the tenant that sends it, as
// one *apierr.ValidationError; the cursor is checked against the tenant
// and the rest of q.
func (q *DeploymentLogQuery) Validate(tenant string) error {
	_, err := q.walk(tenant)
	return err
}

func (q *DeploymentLogQuery) walk(tenant string) (*deploymentLogWalk, error) {
	c := &checker{}
	w := &deploymentLogWalk{typ: LogDeploy, Filter: revlog.Filter{Limit: DefaultDeploymentLogPageSize}}
	switch id, ok := pathID(q.DeploymentID); {
	case q.DeploymentID == "":
		c.add([]any{"query", "deployment_id"}, apierr.TypeMissing, apierr.MsgFieldRequired)
	case !ok:
		c.add([]any{"query", "deployment_id"}, apierr.TypeUUIDParsing, apierr.MsgInvalidUUID)
	default:
		w.deployment = id
	}
	if q.RevisionID != "" {
		id, ok := pathID(q.RevisionID)
		if !ok {
			c.add([]any{"query", "revision_id"}, apierr.TypeUUIDParsing, apierr.MsgInvalidUUID)
		}
		w.revision = id
	}
	bound := len(c.ps) == 0 // the ids the cursor is bound to are valid
	switch strings.ToUpper(q.LogType) {
	case "", "DEPLOY":
	case "BUILD":
		w.typ = LogBuild
	default:
		bound = false
		c.add([]any{"query", "log_type"}, apierr.TypeLiteralError, "Input should be 'BUILD' or 'DEPLOY'")
	}
	orderOK := true
	switch q.SortOrder {
	case "", "asc":
	case "desc":
		w.Desc = true
	default:
		orderOK = false
		c.add([]any{"query", "sort_order"}, apierr.TypeLiteralError, "Input should be 'asc' or 'desc'")
	}
	if q.PageSize != nil {
		switch {
		case *q.PageSize < 1:
			c.add([]any{"query", "page_size"}, apierr.TypeGreaterThanEqual, "Input should be greater than or equal to 1")
		case *q.PageSize > MaxDeploymentLogPageSize:
			c.add([]any{"query", "page_size"}, apierr.TypeLessThanEqual,
				fmt.Sprintf("Input should be less than or equal to %d", MaxDeploymentLogPageSize))
		default:
			w.Limit = *q.PageSize
		}
	}
	if q.Cursor != "" && bound {
		// (A cursor is not looked at while what it is bound to is wrong.)
		desc, place, ok := decodeLogCursor(q.Cursor, logBinding(tenant, w.deployment, w.revision, w.typ))
		switch {
		case !ok:
			c.add([]any{"query", "cursor"}, apierr.TypeValueError,
				"Input should be a next_cursor this server answered for this query (its deployment_id, revision_id and log_type)")
		case desc != w.Desc && orderOK:
			c.add([]any{"query", "cursor"}, apierr.TypeValueError, "The cursor belongs to a page of the other sort_order")
		default:
			w.after = place
		}
	}
	if q.Level != "" {
		l, ok := parseLevel(q.Level)
		if !ok {
			c.add([]any{"query", "level"}, apierr.TypeLiteralError, "Input should be 'DEBUG', 'INFO', 'WARNING', 'ERROR' or 'CRITICAL'")
		}
		w.Level = revlog.Level(l)
	}
	if len(q.Query) > 1024 {
		c.add([]any{"query", "query"}, apierr.TypeStringTooLong, "String should have at most 1024 bytes")
	}
	w.Query = q.Query
	w.Start = c.logTime("query", "start_time", q.StartTime)
	w.End = c.logTime("query", "end_time", q.EndTime)
	if !w.Start.IsZero() && !w.End.IsZero() && !w.End.After(w.Start) {
		c.add([]any{"query", "end_time"}, apierr.TypeValueError, "end_time should be after start_time")
	}
	if err := apierr.Validation(c.ps...); err != nil {
		return nil, err
	}
	return w, nil
}

// ListDeploymentLogs returns a page of the build or deploy logs of the
// tenant's deployment: of the revision q names, or of every revision, each
// revision's log after the other (oldest revision first, each log oldest
// line first; the reverse with sort_order desc), filtered by q's level,
// query and time window. The page holds at most q.PageSize lines; it may
// hold fewer, or none, while NextCursor is not nil, when a filter few
// lines match made it read many (each page reads at most about 10,000
// lines). NextCursor is a place in the logs, not an offset: lines written
// while a client pages through the logs are neither repeated nor make it
// skip one, and a walk in asc order sees the lines appended after its
// place. A cursor is bound to its tenant and query. A log that dropped
// lines (Options.LogRetention) answers one WARNING line counting them, as
// ListLogs does. Errors: *apierr.ValidationError for q (every problem, at
// ["query", name]; a cursor that is malformed, changed, or of another
// tenant or query is one), *apierr.NotFoundError (deployment or revision).
func (cp *ControlPlane) ListDeploymentLogs(ctx context.Context, tenant string, q *DeploymentLogQuery) (*DeploymentLogPage, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	if q == nil {
		q = &DeploymentLogQuery{}
	}
	w, err := q.walk(tenant)
	if err != nil {
		return nil, err
	}
	var page *DeploymentLogPage
	err = cp.st.View(ctx, func(r store.Reader) error {
		if w.revision != "" {
			if err := cp.revisionExists(r, tenant, w.deployment, w.revision); err != nil {
				return err
			}
		} else if _, err := cp.storedDeployment(r, tenant, w.deployment); err != nil {
			return err
		}
		tp, err := cp.readTenant(r, tenant)
		if err != nil {
			return err
		}
		k := logKey(tenant, tp, w.deployment, w.revision, w.typ)
		p, err := cp.logs.Walk(r, &revlog.Walk{Tenant: tenant, TenantPrefix: tp, Deployment: w.deployment, Kind: k.Kind,
			Revision: w.revision, After: w.after, Filter: w.Filter})
		if err != nil {
			return err
		}
		page = &DeploymentLogPage{Items: make([]LogEntry, 0, len(p.Lines))}
		for _, f := range p.Lines {
			page.Items = append(page.Items, logEntry(f.Revision, w.typ, f.Entry))
		}
		if p.Next != nil {
			c, err := encodeLogCursor(w.Desc, *p.Next, logBinding(tenant, w.deployment, w.revision, w.typ))
			if err != nil {
				return err
			}
			page.NextCursor = &c
		}
		return nil
	})
	if err != nil {
		return nil, cp.storeErr("list deployment logs", err)
	}
	return page, nil
}

// A cursor of the deployment logs is base64url (no padding) of:
//
//	1 byte   version (1)
//	1 byte   order: 0 asc, 1 desc
//	16 bytes the revision of the place (a UUID)
//	8 bytes  the line's place in its log, big-endian
//	16 bytes SHA-256 of the binding and the 26 bytes above, cut
//
// The binding names the tenant, deployment, revision filter and log type
// of the query: a cursor of another query, or one changed anywhere,
// fails the digest. The digest is not a secret: whoever forges a cursor
// names a place in the logs of the deployment its own query reads, under
// its own tenant, and nothing else.
const (
	logCursorVersion = 1
	logCursorBody    = 1 + 1 + 16 + 8
	logCursorLen     = logCursorBody + 16
)

// logBinding is what a cursor of the deployment logs is bound to.
func logBinding(tenant, deployment, revision string, t LogType) string {
	return strings.Join([]string{"deployplane deployment-logs cursor", tenant, deployment, revision, string(t)}, "\x00")
}

func logCursorDigest(binding string, body []byte) []byte {
	h := sha256.New()
	h.Write([]byte(binding))
	h.Write([]byte{0})
	h.Write(body)
	return h.Sum(nil)[:logCursorLen-logCursorBody]
}

// encodeLogCursor is the cursor of place p in the order desc, bound to
// binding.
func encodeLogCursor(desc bool, p revlog.Place, binding string) (string, error) {
	rev, err := uuid.Parse(p.Revision)
	if err != nil {
		return "", fmt.Errorf("controlplane: a log place in revision %q, not a UUID", p.Revision)
	}
	b := make([]byte, logCursorBody, logCursorLen)
	b[0] = logCursorVersion
	if desc {
		b[1] = 1
	}
	copy(b[2:18], rev[:])
	binary.BigEndian.PutUint64(b[18:], p.Seq)
	b = append(b, logCursorDigest(binding, b)...)
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// decodeLogCursor decodes an encodeLogCursor string made with binding; ok
// is false for any other string.
func decodeLogCursor(s, binding string) (desc bool, p *revlog.Place, ok bool) {
	if len(s) != base64.RawURLEncoding.EncodedLen(logCursorLen) {
		return false, nil, false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != logCursorLen || b[0] != logCursorVersion || b[1] > 1 {
		return false, nil, false
	}
	want := logCursorDigest(binding, b[:logCursorBody])
	if string(want) != string(b[logCursorBody:]) {
		return false, nil, false
	}
	rev, err := uuid.FromBytes(b[2:18])
	if err != nil {
		return false, nil, false
	}
	return b[1] == 1, &revlog.Place{Revision: rev.String(), Seq: binary.BigEndian.Uint64(b[18:logCursorBody])}, true
}

package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/controlplane/internal/revlog"
	"github.com/deployplane/deployplane/controlplane/internal/workqueue"
	"github.com/deployplane/deployplane/store"
	"github.com/deployplane/deployplane/wiretime"
)

// LogType names one of the two logs every revision keeps.
type LogType string

// The two logs of a revision.
const (
	// LogBuild is the build's output: cloning, image building.
	LogBuild LogType = "build"
	// LogDeploy is the deployer's steps and the running server's output.
	LogDeploy LogType = "deploy"
)

// LogLevel is the level of a log line. Lines are stored and answered with
// one of the five levels below; Reporter.Log and ListLogs read a level
// case-insensitively, and take WARN for WARNING.
type LogLevel string

// The log levels (the names Python's logging uses, which langgraph-cli
// colours: ERROR and CRITICAL red, WARNING yellow).
const (
	LevelDebug    LogLevel = "DEBUG"
	LevelInfo     LogLevel = "INFO"
	LevelWarning  LogLevel = "WARNING"
	LevelError    LogLevel = "ERROR"
	LevelCritical LogLevel = "CRITICAL"
)

// LogLevels lists the five log levels, lowest first.
func LogLevels() []LogLevel {
	ls := revlog.Levels()
	out := make([]LogLevel, 0, len(ls))
	for _, l := range ls {
		out = append(out, LogLevel(l))
	}
	return out
}

// parseLevel returns the level named by s (case-insensitive; WARN is
// WARNING).
func parseLevel(s string) (LogLevel, bool) {
	l, ok := revlog.ParseLevel(s)
	if !ok {
		return "", false
	}
	return LogLevel(l), true
}

// LogLine is a line a Deployer writes to one of a revision's logs.
type LogLine struct {
	// Type is the log the line belongs to: LogBuild or LogDeploy.
	Type LogType `json:"type"`
	// Time is when the line was written; the zero time means now. It is
	// stored in UTC at the microsecond.
	Time time.Time `json:"time,omitzero"`
	// Level is one of the LogLevel values (case-insensitive, WARN for
	// WARNING); "" means INFO.
	Level LogLevel `json:"level,omitempty"`
	// Message is the line's text. Trailing line breaks are removed,
	// invalid UTF-8 is replaced, and a message longer than
	// LogRetention.MaxLineBytes is cut there (and ends with " [truncated]").
	Message string `json:"message"`
}

// LogEntry is a log line as the API answers it. ID is unique among the
// lines of every log of every revision (it names the revision, the log and
// the line's place in it); Timestamp is the line's time.
type LogEntry struct {
	ID        string        `json:"id"`
	Timestamp wiretime.Time `json:"timestamp"`
	Level     LogLevel      `json:"level"`
	Message   string        `json:"message"`
}

// LogPage is one page of ListLogs. Logs is never nil. NextOffset is the
// offset of the next page (the position after its last line), or nil when
// the page holds no line: a walk ends at its first empty page. In asc
// order a page that is not full still has a NextOffset, from which lines
// written later are read (langgraph-cli follows a build's log this way).
type LogPage struct {
	Logs       []LogEntry `json:"logs"`
	NextOffset *string    `json:"next_offset"`
}

// LogRetention bounds each log of a revision (its build log, and its
// deploy log, each on its own). When a write takes a log beyond MaxLines
// lines or MaxBytes bytes of messages, its oldest lines are dropped in the
// same store transaction, and counted: ListLogs then answers, in place of
// the dropped lines, one line of level WARNING saying how many were
// dropped ("1234 earlier lines dropped: ..."), stamped with the time of the
// newest dropped line. Zero fields take the defaults.
type LogRetention struct {
	// MaxLines is the most lines a log keeps. Default 10,000.
	MaxLines int
	// MaxBytes is the most bytes of messages a log keeps. Default 5 MiB.
	MaxBytes int
	// MaxLineBytes caps one message; a longer one is cut. Default 16 KiB.
	MaxLineBytes int
}

// Defaults of LogRetention and of a log query.
const (
	DefaultLogMaxLines     = revlog.DefaultMaxLines
	DefaultLogMaxBytes     = revlog.DefaultMaxBytes
	DefaultLogMaxLineBytes = revlog.DefaultMaxLineBytes
	DefaultLogLimit        = 50
	MaxLogLimit            = 1000
)

// logs returns the revision-log store of r.
func (r LogRetention) logs() *revlog.Logs {
	return revlog.New(&revlog.Options{MaxLines: r.MaxLines, MaxBytes: r.MaxBytes, MaxLineBytes: r.MaxLineBytes})
}

// LogQuery is the query of ListLogs: the parameters of GET
// /v2/deployments/{deployment_id}/revisions/{revision_id}/logs, and the
// body of langgraph-cli's POST .../build_logs and .../deploy_logs. Empty
// strings and nil mean the default; ListLogs validates every field, and
// reports every problem at [In, name].
type LogQuery struct {
	// Type is the log: "build" or "deploy" (required; the POST routes take
	// it from their path).
	Type LogType `json:"-"`
	// Order is "asc" (oldest first, the default) or "desc".
	Order string `json:"order"`
	// Limit is 1..1000; nil means 50.
	Limit *int `json:"limit"`
	// Offset is a next_offset of an earlier page of the same order: the
	// page starts after the line it names.
	Offset string `json:"offset"`
	// Level keeps the lines of that level only (case-insensitive; WARN is
	// WARNING).
	Level string `json:"level"`
	// Query keeps the lines whose message contains it, ignoring case
	// (Unicode simple folding).
	Query string `json:"query"`
	// StartTime and EndTime (RFC 3339) keep the lines with StartTime <=
	// timestamp < EndTime.
	StartTime string `json:"start_time"`
	EndTime   string `json:"end_time"`
	// In is the first element of every problem's loc: "query" (when ""),
	// or "body" for a query sent as a request body.
	In string `json:"-"`
}

// logFilter is a validated LogQuery.
type logFilter struct {
	typ LogType
	revlog.Filter
}

// Validate reports every bad value of q as one *apierr.ValidationError,
// each problem at [q.In, name] (["query", "limit"], ["body", "offset"]).
func (q *LogQuery) Validate() error {
	_, err := q.filter()
	return err
}

func (q *LogQuery) filter() (*logFilter, error) {
	in := q.In
	if in == "" {
		in = "query"
	}
	c := &checker{}
	f := &logFilter{typ: q.Type, Filter: revlog.Filter{Limit: DefaultLogLimit}}
	switch q.Type {
	case LogBuild, LogDeploy:
	case "":
		c.add([]any{in, "type"}, apierr.TypeMissing, apierr.MsgFieldRequired)
	default:
		c.add([]any{in, "type"}, apierr.TypeLiteralError, "Input should be 'build' or 'deploy'")
	}
	switch q.Order {
	case "", "asc":
	case "desc":
		f.Desc = true
	default:
		c.add([]any{in, "order"}, apierr.TypeLiteralError, "Input should be 'asc' or 'desc'")
	}
	if q.Limit != nil {
		switch {
		case *q.Limit < 1:
			c.add([]any{in, "limit"}, apierr.TypeGreaterThanEqual, "Input should be greater than or equal to 1")
		case *q.Limit > MaxLogLimit:
			c.add([]any{in, "limit"}, apierr.TypeLessThanEqual, fmt.Sprintf("Input should be less than or equal to %d", MaxLogLimit))
		default:
			f.Limit = *q.Limit
		}
	}
	if q.Offset != "" {
		desc, seq, ok := DecodeLogOffset(q.Offset)
		validOrder := q.Order == "" || q.Order == "asc" || q.Order == "desc"
		switch {
		case !ok:
			c.add([]any{in, "offset"}, apierr.TypeValueError, "Input should be a next_offset this server answered")
		case desc != f.Desc && validOrder:
			c.add([]any{in, "offset"}, apierr.TypeValueError, "The offset belongs to a page of the other order")
		default:
			f.After = &seq
		}
	}
	if q.Level != "" {
		l, ok := parseLevel(q.Level)
		if !ok {
			c.add([]any{in, "level"}, apierr.TypeLiteralError, "Input should be 'DEBUG', 'INFO', 'WARNING', 'ERROR' or 'CRITICAL'")
		}
		f.Level = revlog.Level(l)
	}
	if len(q.Query) > 1024 {
		c.add([]any{in, "query"}, apierr.TypeStringTooLong, "String should have at most 1024 bytes")
	}
	f.Query = q.Query
	f.Start = c.logTime(in, "start_time", q.StartTime)
	f.End = c.logTime(in, "end_time", q.EndTime)
	if !f.Start.IsZero() && !f.End.IsZero() && !f.End.After(f.Start) {
		c.add([]any{in, "end_time"}, apierr.TypeValueError, "end_time should be after start_time")
	}
	if err := apierr.Validation(c.ps...); err != nil {
		return nil, err
	}
	return f, nil
}

func (c *checker) logTime(in, name, s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		c.add([]any{in, name}, apierr.TypeValueError, "Input should be an RFC 3339 date and time, e.g. 2026-11-21T10:04:05Z")
	}
	return t
}

// EncodeLogOffset and DecodeLogOffset are the opaque offsets of log pages:
// the order of the page and the position of its last line. ok is false for
// a string EncodeLogOffset cannot have made. (Exported for tools and
// tests; clients pass next_offset back as it is.)
func EncodeLogOffset(desc bool, seq uint64) string { return revlog.EncodeOffset(desc, seq) }

// DecodeLogOffset decodes an EncodeLogOffset string.
func DecodeLogOffset(s string) (desc bool, seq uint64, ok bool) { return revlog.DecodeOffset(s) }

// logKey is the key of one log of a revision in the revision-log store;
// tp is the tenant's prefix (readTenant, writeTenant).
func logKey(tenant, tp, deploymentID, revisionID string, t LogType) revlog.Key {
	k := revlog.Key{Tenant: tenant, TenantPrefix: tp, Deployment: deploymentID, Revision: revisionID, Kind: revlog.Build}
	if t == LogDeploy {
		k.Kind = revlog.Deploy
	}
	return k
}

// appendLogs writes lines to the logs of a revision, in tx, bounding each
// log (LogRetention). It is the one place log lines are written: whatever
// else a written line must cause belongs here.
func (cp *ControlPlane) appendLogs(tx store.Tx, tenant, deploymentID, revisionID string, lines []LogLine, now time.Time) error {
	byType := map[LogType][]revlog.Line{}
	for _, l := range lines {
		if l.Type != LogBuild && l.Type != LogDeploy {
			return fmt.Errorf("controlplane: log line of unknown type %q (want build or deploy)", l.Type)
		}
		lvl := LevelInfo
		if l.Level != "" {
			var ok bool
			if lvl, ok = parseLevel(string(l.Level)); !ok {
				return fmt.Errorf("controlplane: log line of unknown level %q", l.Level)
			}
		}
		if l.Time.IsZero() {
			l.Time = now
		}
		byType[l.Type] = append(byType[l.Type], revlog.Line{Time: l.Time, Level: revlog.Level(lvl), Message: l.Message})
	}
	tp, err := cp.writeTenant(tx, tenant)
	if err != nil {
		return err
	}
	for _, t := range []LogType{LogBuild, LogDeploy} {
		if len(byType[t]) == 0 {
			continue
		}
		stored, err := cp.logs.Append(tx, logKey(tenant, tp, deploymentID, revisionID, t), byType[t])
		if err != nil {
			return err
		}
		// Each line stored is also a log event of the tenant's event log
		// (events.go), in this Update, for followers that ask for it.
		for _, e := range stored {
			b, err := json.Marshal(logEntry(revisionID, t, e))
			if err != nil {
				return err
			}
			if err := cp.logEvent(tx, tenant, deploymentID, revisionID, t, e.Time, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// logEntry is the LogEntry of a line of log t of a revision.
func logEntry(revisionID string, t LogType, e revlog.Entry) LogEntry {
	id := revisionID + ":" + string(t) + ":"
	if e.Dropped > 0 {
		id += "dropped:" + strconv.FormatUint(e.Dropped, 10)
	} else {
		id += strconv.FormatUint(e.Seq, 10)
	}
	return LogEntry{ID: id, Timestamp: wiretime.New(e.Time), Level: LogLevel(e.Level), Message: e.Message}
}

// AppendLogs writes lines to the logs of a revision of the tenant's
// deployment, in one store transaction, outside any claimed work: for a
// Deployer that keeps streaming a running server's output once the
// revision is DEPLOYED (during the work, Reporter.Log does the same and
// renews the lease). Each log is bounded by Options.LogRetention. Errors:
// *apierr.NotFoundError (deployment or revision), an error for a line of
// unknown type or level (nothing is written), or a store error.
func (cp *ControlPlane) AppendLogs(ctx context.Context, tenant, deploymentID, revisionID string, lines ...LogLine) error {
	if err := apierr.CheckTenant(tenant); err != nil {
		return err
	}
	did, ok := pathID(deploymentID)
	if !ok {
		return &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: deploymentID}
	}
	rid, ok := pathID(revisionID)
	if !ok {
		return &apierr.NotFoundError{Kind: apierr.KindRevision, ID: revisionID}
	}
	if len(lines) == 0 {
		return nil
	}
	now := cp.now()
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		if err := cp.revisionExists(tx, tenant, did, rid); err != nil {
			return err
		}
		return cp.appendLogs(tx, tenant, did, rid, lines, now)
	})
	return cp.storeErr("append logs", err)
}

// revisionExists answers the *apierr.NotFoundError of a missing deployment
// or revision.
func (cp *ControlPlane) revisionExists(r store.Reader, tenant, deploymentID, revisionID string) error {
	tp, err := cp.readTenant(r, tenant)
	if err != nil {
		return err
	}
	if _, err := r.Get(colDeployments, deploymentKey(tp, deploymentID)); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: deploymentID}
		}
		return err
	}
	if _, err := r.Get(colRevisions, revisionKey(tp, deploymentID, revisionID)); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return &apierr.NotFoundError{Kind: apierr.KindRevision, ID: revisionID}
		}
		return err
	}
	return nil
}

// Log writes lines for the reporter's revision in one store transaction,
// renewing the lease while the work is the reporter's. Lines may still be
// written once the revision is terminal (a deployer's last words after
// reporting DEPLOYED). Errors: ErrLeaseLost when another worker owns the
// revision now (nothing is written), an error for a line of unknown type
// or level, or a store or context error.
func (r *reporter) Log(ctx context.Context, lines ...LogLine) error {
	if len(lines) == 0 {
		return nil
	}
	cp, j := r.cp, r.j
	now := cp.now()
	err := cp.st.Update(ctx, func(tx store.Tx) error {
		cur, err := workqueue.Own(tx, j.lease)
		if err != nil {
			return err
		}
		if cur != nil {
			if err := cp.queue.Extend(tx, cur, now); err != nil {
				return err
			}
		}
		if err := cp.revisionExists(tx, j.tenant, j.deployment, j.revision); err != nil {
			return err
		}
		return cp.appendLogs(tx, j.tenant, j.deployment, j.revision, lines, now)
	})
	return cp.storeErr("log", err)
}

// ListLogs returns a page of one log of a revision of the tenant's
// deployment (revisionID "" means the deployment's latest revision, as
// langgraph-cli's POST /v1/projects/{id}/deploy_logs asks). Lines come in
// the order they were written (asc) or the reverse (desc), filtered by
// q's level, query and time window; Offset continues after an earlier
// page's last line. A log that dropped lines (Options.LogRetention)
// answers, before its oldest line kept, one WARNING line counting them,
// which pages and filters like any other. Errors: *apierr.ValidationError
// for q (every problem, at [q.In, name]), *apierr.NotFoundError
// (deployment or revision).
func (cp *ControlPlane) ListLogs(ctx context.Context, tenant, deploymentID, revisionID string, q *LogQuery) (*LogPage, error) {
	if err := apierr.CheckTenant(tenant); err != nil {
		return nil, err
	}
	if q == nil {
		q = &LogQuery{}
	}
	f, err := q.filter()
	if err != nil {
		return nil, err
	}
	did, ok := pathID(deploymentID)
	if !ok {
		return nil, &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: deploymentID}
	}
	rid, rok := pathID(revisionID)
	var page *LogPage
	err = cp.st.View(ctx, func(r store.Reader) error {
		if revisionID == "" {
			dep, err := cp.getDeployment(r, tenant, did)
			if err != nil {
				return err
			}
			if dep.LatestRevisionID == nil {
				page = &LogPage{Logs: []LogEntry{}}
				return nil
			}
			rid, rok = *dep.LatestRevisionID, true
		}
		if !rok {
			if _, err := cp.getDeployment(r, tenant, did); errors.Is(err, apierr.ErrNotFound) {
				return &apierr.NotFoundError{Kind: apierr.KindDeployment, ID: did}
			}
			return &apierr.NotFoundError{Kind: apierr.KindRevision, ID: revisionID}
		}
		if err := cp.revisionExists(r, tenant, did, rid); err != nil {
			return err
		}
		var err error
		page, err = cp.logPage(r, tenant, did, rid, f)
		return err
	})
	if err != nil {
		return nil, cp.storeErr("list logs", err)
	}
	return page, nil
}

// logPage reads the page f asks for of a revision's log.
func (cp *ControlPlane) logPage(r store.Reader, tenant, deploymentID, revisionID string, f *logFilter) (*LogPage, error) {
	tp, err := cp.readTenant(r, tenant)
	if err != nil {
		return nil, err
	}
	es, err := cp.logs.List(r, logKey(tenant, tp, deploymentID, revisionID, f.typ), &f.Filter)
	if err != nil {
		return nil, err
	}
	page := &LogPage{Logs: make([]LogEntry, 0, len(es))}
	for _, e := range es {
		page.Logs = append(page.Logs, logEntry(revisionID, f.typ, e))
	}
	if len(es) > 0 {
		page.NextOffset = new(EncodeLogOffset(f.Desc, es[len(es)-1].Seq))
	}
	return page, nil
}

package controlplane

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/deployplane/deployplane/apierr"
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

// levels lists the levels in the order of their code in a stored line.
var levels = [...]LogLevel{LevelDebug, LevelInfo, LevelWarning, LevelError, LevelCritical}

// LogLevels lists the five log levels, lowest first.
func LogLevels() []LogLevel { l := levels; return l[:] }

// parseLevel returns the level named by s (case-insensitive; WARN is
// WARNING) and its code.
func parseLevel(s string) (LogLevel, byte, bool) {
	u := LogLevel(strings.ToUpper(strings.TrimSpace(s)))
	if u == "WARN" {
		u = LevelWarning
	}
	for i, l := range levels {
		if l == u {
			return l, byte(i), true
		}
	}
	return "", 0, false
}

// LogLine is a line a Deployer writes to one of a revision's logs.
type LogLine struct {
	// Type is the log the line belongs to: LogBuild or LogDeploy.
	Type LogType
	// Time is when the line was written; the zero time means now. It is
	// stored in UTC at the microsecond.
	Time time.Time
	// Level is one of the LogLevel values (case-insensitive, WARN for
	// WARNING); "" means INFO.
	Level LogLevel
	// Message is the line's text. Trailing line breaks are removed,
	// invalid UTF-8 is replaced, and a message longer than
	// LogRetention.MaxLineBytes is cut there (and ends with " [truncated]").
	Message string
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
	DefaultLogMaxLines     = 10000
	DefaultLogMaxBytes     = 5 << 20
	DefaultLogMaxLineBytes = 16 << 10
	DefaultLogLimit        = 50
	MaxLogLimit            = 1000
)

func (r LogRetention) withDefaults() LogRetention {
	if r.MaxLines <= 0 {
		r.MaxLines = DefaultLogMaxLines
	}
	if r.MaxBytes <= 0 {
		r.MaxBytes = DefaultLogMaxBytes
	}
	if r.MaxLineBytes <= 0 {
		r.MaxLineBytes = DefaultLogMaxLineBytes
	}
	return r
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
	typ        LogType
	desc       bool
	limit      int
	after      uint64 // the offset's line (0: from the start; desc: from the end)
	hasOffset  bool
	level      LogLevel
	query      string // lowercased
	start, end time.Time
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
	f := &logFilter{typ: q.Type, limit: DefaultLogLimit}
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
		f.desc = true
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
			f.limit = *q.Limit
		}
	}
	if q.Offset != "" {
		desc, seq, ok := DecodeLogOffset(q.Offset)
		validOrder := q.Order == "" || q.Order == "asc" || q.Order == "desc"
		switch {
		case !ok:
			c.add([]any{in, "offset"}, apierr.TypeValueError, "Input should be a next_offset this server answered")
		case desc != f.desc && validOrder:
			c.add([]any{in, "offset"}, apierr.TypeValueError, "The offset belongs to a page of the other order")
		default:
			f.after, f.hasOffset = seq, true
		}
	}
	if q.Level != "" {
		l, _, ok := parseLevel(q.Level)
		if !ok {
			c.add([]any{in, "level"}, apierr.TypeLiteralError, "Input should be 'DEBUG', 'INFO', 'WARNING', 'ERROR' or 'CRITICAL'")
		}
		f.level = l
	}
	if len(q.Query) > 1024 {
		c.add([]any{in, "query"}, apierr.TypeStringTooLong, "String should have at most 1024 bytes")
	}
	f.query = strings.ToLower(q.Query)
	f.start = c.logTime(in, "start_time", q.StartTime)
	f.end = c.logTime(in, "end_time", q.EndTime)
	if !f.start.IsZero() && !f.end.IsZero() && !f.end.After(f.start) {
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
func EncodeLogOffset(desc bool, seq uint64) string {
	o := byte('a')
	if desc {
		o = 'd'
	}
	return base64.RawURLEncoding.EncodeToString(strconv.AppendUint([]byte{'1', o}, seq, 10))
}

// DecodeLogOffset decodes an EncodeLogOffset string.
func DecodeLogOffset(s string) (desc bool, seq uint64, ok bool) {
	if len(s) > 32 {
		return false, 0, false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) < 3 || b[0] != '1' || (b[1] != 'a' && b[1] != 'd') {
		return false, 0, false
	}
	seq, err = strconv.ParseUint(string(b[2:]), 10, 64)
	if err != nil || EncodeLogOffset(b[1] == 'd', seq) != s {
		return false, 0, false // one spelling per position (base64 skips line breaks; numbers have leading zeros)
	}
	return b[1] == 'd', seq, true
}

// Storage of the logs, beside the revisions (a layout of its own, so that
// it does not move with records.go's):
//
//	cp_revision_logs  tenant/deployment/revision/b          -> logMeta JSON (b: build, d: deploy)
//	cp_revision_logs  tenant/deployment/revision/b/seq      -> line: 1, level code, 8 bytes Unix micros (big-endian), message
//
// seq is 16 hex digits, from 1, so that key order is write order. The meta
// record holds the next seq, the first seq kept, the bytes of messages kept
// and what was dropped. A write is one Get of the meta record and one Put
// per line and of the meta; dropping reads and deletes only the lines it
// drops. removeLogs deletes a deployment's logs with one prefix scan.
const colRevisionLogs = "cp_revision_logs"

const lineVersion = 1

type logMeta struct {
	V       int    `json:"v"`
	Next    uint64 `json:"n"`            // the seq of the next line
	First   uint64 `json:"f"`            // the oldest line kept
	Bytes   int    `json:"b"`            // bytes of the messages kept
	Dropped uint64 `json:"d,omitempty"`  // lines dropped so far
	DropAt  int64  `json:"dt,omitempty"` // Unix micros of the newest dropped line
}

func logCode(t LogType) string {
	if t == LogBuild {
		return "b"
	}
	return "d"
}

func logPrefix(tenant, deploymentID, revisionID string, t LogType) string {
	return key(tenant, deploymentID, revisionID, logCode(t))
}

func lineKey(prefix string, seq uint64) string { return fmt.Sprintf("%s/%016x", prefix, seq) }

func encodeLine(code byte, at time.Time, msg string) []byte {
	b := make([]byte, 10, 10+len(msg))
	b[0], b[1] = lineVersion, code
	binary.BigEndian.PutUint64(b[2:], uint64(at.UnixMicro()))
	return append(b, msg...)
}

func decodeLine(b []byte) (level LogLevel, at time.Time, msg []byte, err error) {
	if len(b) < 10 || b[0] != lineVersion || int(b[1]) >= len(levels) {
		return "", time.Time{}, nil, fmt.Errorf("controlplane: malformed log line (%d bytes)", len(b))
	}
	return levels[b[1]], time.UnixMicro(int64(binary.BigEndian.Uint64(b[2:]))).UTC(), b[10:], nil
}

// cleanLine checks and normalizes a line; now is the time of a line
// without one.
func (r LogRetention) cleanLine(l LogLine, now time.Time) (LogLine, byte, error) {
	if l.Type != LogBuild && l.Type != LogDeploy {
		return l, 0, fmt.Errorf("controlplane: log line of unknown type %q (want build or deploy)", l.Type)
	}
	lvl, code := LevelInfo, byte(1)
	if l.Level != "" {
		var ok bool
		if lvl, code, ok = parseLevel(string(l.Level)); !ok {
			return l, 0, fmt.Errorf("controlplane: log line of unknown level %q", l.Level)
		}
	}
	l.Level = lvl
	if l.Time.IsZero() {
		l.Time = now
	}
	l.Time = l.Time.UTC().Truncate(time.Microsecond)
	msg := strings.TrimRight(l.Message, "\r\n")
	if !utf8.ValidString(msg) {
		msg = strings.ToValidUTF8(msg, "\uFFFD")
	}
	if len(msg) > r.MaxLineBytes {
		const mark = " [truncated]"
		cut := max(r.MaxLineBytes-len(mark), 0)
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + mark
	}
	l.Message = msg
	return l, code, nil
}

// appendLogs writes lines to the logs of a revision, in tx, bounding each
// log (LogRetention). It is the one place log lines are written: whatever
// else a written line must cause belongs here.
func (cp *ControlPlane) appendLogs(tx store.Tx, tenant, deploymentID, revisionID string, lines []LogLine, now time.Time) error {
	byType := map[LogType][]LogLine{}
	codes := map[LogType][]byte{}
	for _, l := range lines {
		l, code, err := cp.logs.cleanLine(l, now)
		if err != nil {
			return err
		}
		byType[l.Type] = append(byType[l.Type], l)
		codes[l.Type] = append(codes[l.Type], code)
	}
	for _, t := range []LogType{LogBuild, LogDeploy} {
		if len(byType[t]) == 0 {
			continue
		}
		// Each line stored is also a log event of the tenant's event log
		// (events.go), in this Update, for followers that ask for it.
		idBase := revisionID + ":" + string(t) + ":"
		event := func(seq uint64, l LogLine) error {
			b, err := json.Marshal(LogEntry{ID: idBase + strconv.FormatUint(seq, 10), Timestamp: wiretime.New(l.Time),
				Level: l.Level, Message: l.Message})
			if err != nil {
				return err
			}
			return cp.logEvent(tx, tenant, deploymentID, revisionID, t, l.Time, b)
		}
		if err := cp.appendLog(tx, logPrefix(tenant, deploymentID, revisionID, t), byType[t], codes[t], event); err != nil {
			return err
		}
	}
	return nil
}

// appendLog stores lines (their level codes in codes) at the end of the log
// under prefix, dropping the oldest beyond the bounds, and calls stored for
// each line kept, with its sequence number.
func (cp *ControlPlane) appendLog(tx store.Tx, prefix string, lines []LogLine, codes []byte, stored func(seq uint64, l LogLine) error) error {
	meta := logMeta{V: 1, Next: 1, First: 1}
	b, err := tx.Get(colRevisionLogs, prefix)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &meta); err != nil {
			return fmt.Errorf("controlplane: decoding log record %s: %w", prefix, err)
		}
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	// Lines of this batch that would be dropped at once are not written:
	// keep the longest tail within the bounds.
	keep, size := 0, 0
	for i := len(lines) - 1; i >= 0; i-- {
		if keep == cp.logs.MaxLines || size+len(lines[i].Message) > cp.logs.MaxBytes {
			break
		}
		keep++
		size += len(lines[i].Message)
	}
	if skip := len(lines) - keep; skip > 0 {
		// Everything kept before this batch goes too.
		if err := cp.dropLines(tx, prefix, &meta, meta.Next); err != nil {
			return err
		}
		meta.Dropped += uint64(skip)
		for _, l := range lines[:skip] {
			meta.DropAt = max(meta.DropAt, l.Time.UnixMicro())
		}
		meta.Next += uint64(skip)
		meta.First = meta.Next
		lines, codes = lines[skip:], codes[skip:]
	}
	for i, l := range lines {
		if err := tx.Put(colRevisionLogs, lineKey(prefix, meta.Next), encodeLine(codes[i], l.Time, l.Message)); err != nil {
			return err
		}
		if err := stored(meta.Next, l); err != nil {
			return err
		}
		meta.Next++
		meta.Bytes += len(l.Message)
	}
	if int(meta.Next-meta.First) > cp.logs.MaxLines || meta.Bytes > cp.logs.MaxBytes {
		if err := cp.dropLines(tx, prefix, &meta, 0); err != nil {
			return err
		}
	}
	b, err = json.Marshal(&meta)
	if err != nil {
		return err
	}
	return tx.Put(colRevisionLogs, prefix, b)
}

// dropLines deletes the oldest lines of a log: those before seq upTo, or,
// when upTo is 0, as many as it takes to bring the log within its bounds.
func (cp *ControlPlane) dropLines(tx store.Tx, prefix string, meta *logMeta, upTo uint64) error {
	var ks []string
	count, size := int(meta.Next-meta.First), meta.Bytes
	err := tx.Scan(colRevisionLogs, prefix+"/", nil, func(k string, v []byte) (bool, error) {
		if upTo == 0 && count <= cp.logs.MaxLines && size <= cp.logs.MaxBytes {
			return false, nil
		}
		_, at, msg, err := decodeLine(v)
		if err != nil {
			return false, err
		}
		ks = append(ks, k)
		count--
		size -= len(msg)
		meta.Dropped++
		meta.DropAt = max(meta.DropAt, at.UnixMicro())
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, k := range ks {
		if err := tx.Delete(colRevisionLogs, k); err != nil {
			return err
		}
	}
	meta.First += uint64(len(ks))
	meta.Bytes = size
	return nil
}

// removeLogs deletes every log of a deployment's revisions.
func removeLogs(tx store.Tx, tenant, deploymentID string) error {
	var ks []string
	err := tx.Scan(colRevisionLogs, key(tenant, deploymentID)+"/", nil, func(k string, _ []byte) (bool, error) {
		ks = append(ks, k)
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, k := range ks {
		if err := tx.Delete(colRevisionLogs, k); err != nil {
			return err
		}
	}
	return nil
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
		found, err := ownLease(tx, j)
		if err != nil {
			return err
		}
		if found {
			if err := tx.Put(colPending, j.pkey, lease(j.token, now.Add(cp.leaseFor))); err != nil {
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
		page, err = cp.readLog(r, logPrefix(tenant, did, rid, f.typ), rid, f)
		return err
	})
	if err != nil {
		return nil, cp.storeErr("list logs", err)
	}
	return page, nil
}

func (f *logFilter) match(level LogLevel, at time.Time, msg []byte) bool {
	if f.level != "" && level != f.level {
		return false
	}
	if !f.start.IsZero() && at.Before(f.start) {
		return false
	}
	if !f.end.IsZero() && !at.Before(f.end) {
		return false
	}
	return f.query == "" || strings.Contains(strings.ToLower(string(msg)), f.query)
}

// readLog reads one page of the log under prefix.
func (cp *ControlPlane) readLog(r store.Reader, prefix, revisionID string, f *logFilter) (*LogPage, error) {
	page := &LogPage{Logs: []LogEntry{}}
	b, err := r.Get(colRevisionLogs, prefix)
	if errors.Is(err, store.ErrNotFound) {
		return page, nil
	}
	if err != nil {
		return nil, err
	}
	var meta logMeta
	if err := json.Unmarshal(b, &meta); err != nil {
		return nil, fmt.Errorf("controlplane: decoding log record %s: %w", prefix, err)
	}
	idBase := revisionID + ":" + string(f.typ) + ":"
	var last uint64
	// The line that stands for the dropped ones, at seq First-1.
	marker := func() {
		if meta.Dropped == 0 || len(page.Logs) == f.limit {
			return
		}
		seq := meta.First - 1
		if f.hasOffset && (f.desc && seq >= f.after || !f.desc && seq <= f.after) {
			return
		}
		at := time.UnixMicro(meta.DropAt).UTC()
		msg := fmt.Sprintf("%d earlier lines dropped: this log keeps its last %d lines and %d bytes of messages",
			meta.Dropped, cp.logs.MaxLines, cp.logs.MaxBytes)
		if !f.match(LevelWarning, at, []byte(msg)) {
			return
		}
		page.Logs = append(page.Logs, LogEntry{ID: idBase + "dropped:" + strconv.FormatUint(meta.Dropped, 10),
			Timestamp: wiretime.New(at), Level: LevelWarning, Message: msg})
		last = seq
	}
	opts := &store.ScanOptions{Reverse: f.desc}
	switch {
	case f.hasOffset && f.desc && f.after <= 1:
		opts = nil // nothing before the first line
	case f.hasOffset && f.desc:
		opts.Start = lineKey(prefix, f.after-1)
	case f.hasOffset:
		opts.Start = lineKey(prefix, f.after+1)
	}
	if !f.desc {
		marker()
	}
	if opts != nil && len(page.Logs) < f.limit {
		err = r.Scan(colRevisionLogs, prefix+"/", opts, func(k string, v []byte) (bool, error) {
			level, at, msg, err := decodeLine(v)
			if err != nil {
				return false, err
			}
			if !f.match(level, at, msg) {
				return true, nil
			}
			seq, err := strconv.ParseUint(k[len(prefix)+1:], 16, 64)
			if err != nil {
				return false, fmt.Errorf("controlplane: malformed log key %q", k)
			}
			page.Logs = append(page.Logs, LogEntry{ID: idBase + strconv.FormatUint(seq, 10), Timestamp: wiretime.New(at),
				Level: level, Message: string(msg)})
			last = seq
			return len(page.Logs) < f.limit, nil
		})
		if err != nil {
			return nil, err
		}
	}
	if f.desc {
		marker()
	}
	if len(page.Logs) > 0 {
		page.NextOffset = new(EncodeLogOffset(f.desc, last))
	}
	return page, nil
}

// Package revlog stores the build and deploy logs of revisions: each log
// is a meta record and its lines in the collection cp_revision_logs,
// bounded by lines and bytes (the oldest lines are dropped, and counted,
// in the transaction that writes past a bound), read a page at a time in
// either order from an opaque offset, filtered by level, text and time.
// Walk reads the logs of one kind of all a deployment's revisions the same
// way, one after the other, from a Place, reading at most a budget of
// lines per page.
//
// It knows nothing of deployments beyond the names in a Key: whether a
// revision exists, who may write its logs and what else a written line
// causes are the caller's. Append returns the lines it stored, with their
// places, so that the caller can act on them in the same transaction.
//
// Storage, for a Key with a TenantPrefix (the compact key encoding of
// keyenc: the tenant's prefix, the ids' parts, the kind's byte):
//
//	cp_revision_logs  tp id(deployment) id(revision) b           -> meta JSON (b: build, d: deploy)
//	cp_revision_logs  tp id(deployment) id(revision) b / seq     -> line: 1, level code, 8 bytes Unix micros (big-endian), message
//
// seq is the line's place, from 1: a byte counting its big-endian bytes
// without leading zeros, then those bytes, so that key order is write
// order.
// Builds before the compact keys wrote each log under text keys, which
// are still read and appended to, so that no store needs migrating:
//
//	cp_revision_logs  tenant/deployment/revision/b               -> meta JSON
//	cp_revision_logs  tenant/deployment/revision/b/seq           -> line (seq: 16 hex digits)
//
// A log is kept under the keys it was first written under: compact when
// its Key has a TenantPrefix, else text. The two never meet (a text key
// starts with a printable byte, a tenant prefix with a byte below 0x20).
// The meta record holds the next seq, the first seq kept, the bytes of
// messages kept and what was dropped. A write is one Get of the meta
// record (two for a log written under neither layout yet) and one Put per
// line and of the meta; dropping reads and deletes only the lines it
// drops. DeleteDeployment deletes a deployment's logs with a prefix scan
// in each layout.
package revlog

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/deployplane/deployplane/controlplane/internal/keyenc"
	"github.com/deployplane/deployplane/store"
)

// Collection is the store collection of the logs.
const Collection = "cp_revision_logs"

// Kind is one of the two logs of a revision; its value is the last
// element of the log's key.
type Kind string

// The two logs of a revision.
const (
	Build  Kind = "b"
	Deploy Kind = "d"
)

// Key names one log.
type Key struct {
	Tenant, Deployment, Revision string
	Kind                         Kind
	// TenantPrefix is the tenant's prefix in the compact key encoding
	// (keyenc.Tenants): a log first written with one is kept under
	// compact keys. Without one, the text keys alone are read and
	// written, as builds before the compact keys wrote them.
	TenantPrefix string
}

// compact reports whether k's logs may be under compact keys.
func (k Key) compact() bool { return keyenc.TenantLen(k.TenantPrefix) > 0 }

// logAt is where a log's keys are: its meta record's key, and whether its
// lines' keys are compact.
type logAt struct {
	meta    string
	compact bool
}

func textAt(k Key) logAt {
	return logAt{meta: strings.Join([]string{k.Tenant, k.Deployment, k.Revision, string(k.Kind)}, "/")}
}

func compactAt(k Key) logAt {
	return logAt{meta: k.TenantPrefix + keyenc.ID(k.Deployment) + keyenc.ID(k.Revision) + string(k.Kind), compact: true}
}

// lines is the prefix of the log's lines' keys.
func (a logAt) lines() string { return a.meta + "/" }

// lineKey is the key of the line at seq.
func (a logAt) lineKey(seq uint64) string {
	if a.compact {
		return a.meta + "/" + seqPart(seq)
	}
	return fmt.Sprintf("%s/%016x", a.meta, seq)
}

// seqPart encodes a line's place as a key part that sorts as the number:
// how many bytes it has without leading zeros (1 to 8), then those bytes,
// big-endian. Places below 256 take 2 bytes.
func seqPart(seq uint64) string {
	var b [9]byte
	binary.BigEndian.PutUint64(b[1:], seq)
	i := 1
	for i < 8 && b[i] == 0 {
		i++
	}
	b[i-1] = byte(9 - i)
	return string(b[i-1:])
}

// seq parses the place of the line whose key is k.
func (a logAt) seq(k string) (uint64, error) {
	rest := k[len(a.meta)+1:]
	if a.compact {
		if len(rest) < 2 || int(rest[0]) != len(rest)-1 || len(rest) > 9 || rest[1] == 0 && len(rest) > 2 {
			return 0, fmt.Errorf("revlog: malformed log key %q", k)
		}
		var seq uint64
		for i := 1; i < len(rest); i++ {
			seq = seq<<8 | uint64(rest[i])
		}
		return seq, nil
	}
	seq, err := strconv.ParseUint(rest, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("revlog: malformed log key %q", k)
	}
	return seq, nil
}

// locate finds the log k names: under the keys it was first written
// under, or, for a log not written yet, where Append would write it. It
// answers the log's meta record (the defaults when not found).
func locate(r store.Reader, k Key) (logAt, meta, bool, error) {
	if k.compact() {
		at := compactAt(k)
		m, found, err := readMeta(r, at.meta)
		if found || err != nil {
			return at, m, found, err
		}
	}
	at := textAt(k)
	m, found, err := readMeta(r, at.meta)
	if found || err != nil || !k.compact() {
		return at, m, found, err
	}
	return compactAt(k), m, false, nil
}

// Level is the level of a line.
type Level string

// The levels, in the order of their code in a stored line.
const (
	Debug    Level = "DEBUG"
	Info     Level = "INFO"
	Warning  Level = "WARNING"
	Error    Level = "ERROR"
	Critical Level = "CRITICAL"
)

var levels = [...]Level{Debug, Info, Warning, Error, Critical}

// Levels lists the levels, lowest first.
func Levels() []Level { l := levels; return l[:] }

// ParseLevel returns the level named by s, case-insensitively, taking
// WARN for WARNING.
func ParseLevel(s string) (Level, bool) {
	u := Level(strings.ToUpper(strings.TrimSpace(s)))
	if u == "WARN" {
		u = Warning
	}
	_, ok := levelCode(u)
	return u, ok
}

func levelCode(l Level) (byte, bool) {
	for i, v := range levels {
		if v == l {
			return byte(i), true
		}
	}
	return 0, false
}

// Options bound each log. Zero fields take the defaults.
type Options struct {
	// MaxLines is the most lines a log keeps. Default DefaultMaxLines.
	MaxLines int
	// MaxBytes is the most bytes of messages a log keeps. Default
	// DefaultMaxBytes.
	MaxBytes int
	// MaxLineBytes caps one message; a longer one is cut there and ends
	// with " [truncated]". Default DefaultMaxLineBytes.
	MaxLineBytes int
}

// The defaults of Options.
const (
	DefaultMaxLines     = 10000
	DefaultMaxBytes     = 5 << 20
	DefaultMaxLineBytes = 16 << 10
)

// Logs reads and writes logs within the bounds of its Options.
type Logs struct {
	o Options
}

// New returns the Logs of o; nil means the defaults.
func New(o *Options) *Logs {
	var l Logs
	if o != nil {
		l.o = *o
	}
	if l.o.MaxLines <= 0 {
		l.o.MaxLines = DefaultMaxLines
	}
	if l.o.MaxBytes <= 0 {
		l.o.MaxBytes = DefaultMaxBytes
	}
	if l.o.MaxLineBytes <= 0 {
		l.o.MaxLineBytes = DefaultMaxLineBytes
	}
	return &l
}

// Options returns the bounds in force, defaults filled in.
func (l *Logs) Options() Options { return l.o }

// Line is a line to append.
type Line struct {
	// Time is stored in UTC at the microsecond.
	Time time.Time
	// Level is one of the five levels.
	Level Level
	// Message is stored without trailing line breaks, with invalid UTF-8
	// replaced, and cut at Options.MaxLineBytes.
	Message string
}

// Entry is a line as stored or read.
type Entry struct {
	// Seq is the line's place in its log, from 1. The line that stands
	// for dropped lines is at the place before the oldest line kept.
	Seq uint64
	// Dropped is, for the line that stands for dropped lines, how many
	// were dropped; 0 for every stored line.
	Dropped uint64
	Time    time.Time
	Level   Level
	Message string
}

const lineVersion = 1

type meta struct {
	V       int    `json:"v"`
	Next    uint64 `json:"n"`            // the seq of the next line
	First   uint64 `json:"f"`            // the oldest line kept
	Bytes   int    `json:"b"`            // bytes of the messages kept
	Dropped uint64 `json:"d,omitempty"`  // lines dropped so far
	DropAt  int64  `json:"dt,omitempty"` // Unix micros of the newest dropped line
}

func encodeLine(code byte, at time.Time, msg string) []byte {
	b := make([]byte, 10, 10+len(msg))
	b[0], b[1] = lineVersion, code
	binary.BigEndian.PutUint64(b[2:], uint64(at.UnixMicro()))
	return append(b, msg...)
}

func decodeLine(b []byte) (level Level, at time.Time, msg []byte, err error) {
	if len(b) < 10 || b[0] != lineVersion || int(b[1]) >= len(levels) {
		return "", time.Time{}, nil, fmt.Errorf("revlog: malformed log line (%d bytes)", len(b))
	}
	return levels[b[1]], time.UnixMicro(int64(binary.BigEndian.Uint64(b[2:]))).UTC(), b[10:], nil
}

// clean normalizes a line's time and message.
func (l *Logs) clean(ln Line) Line {
	ln.Time = ln.Time.UTC().Truncate(time.Microsecond)
	msg := strings.TrimRight(ln.Message, "\r\n")
	if !utf8.ValidString(msg) {
		msg = strings.ToValidUTF8(msg, "\uFFFD")
	}
	if len(msg) > l.o.MaxLineBytes {
		const mark = " [truncated]"
		cut := max(l.o.MaxLineBytes-len(mark), 0)
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + mark
	}
	ln.Message = msg
	return ln
}

func readMeta(r store.Reader, prefix string) (meta, bool, error) {
	m := meta{V: 1, Next: 1, First: 1}
	b, err := r.Get(Collection, prefix)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return m, false, nil
	case err != nil:
		return m, false, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, false, fmt.Errorf("revlog: decoding log record %s: %w", prefix, err)
	}
	return m, true, nil
}

// Append stores lines at the end of the log k, in tx, dropping its oldest
// lines beyond the bounds, and returns the lines it kept (cleaned, with
// their places), oldest first. Lines of the batch that the bounds would
// drop at once are not written, only counted. An error for a line of an
// unknown level comes before anything is written.
func (l *Logs) Append(tx store.Tx, k Key, lines []Line) ([]Entry, error) {
	codes := make([]byte, len(lines))
	clean := make([]Line, len(lines))
	for i, ln := range lines {
		c, ok := levelCode(ln.Level)
		if !ok {
			return nil, fmt.Errorf("revlog: log line of unknown level %q", ln.Level)
		}
		codes[i], clean[i] = c, l.clean(ln)
	}
	lines = clean
	at, m, _, err := locate(tx, k)
	if err != nil {
		return nil, err
	}
	// Keep the longest tail of the batch within the bounds.
	keep, size := 0, 0
	for i := len(lines) - 1; i >= 0; i-- {
		if keep == l.o.MaxLines || size+len(lines[i].Message) > l.o.MaxBytes {
			break
		}
		keep++
		size += len(lines[i].Message)
	}
	if skip := len(lines) - keep; skip > 0 {
		// Everything kept before this batch goes too.
		if err := l.drop(tx, at, &m, m.Next); err != nil {
			return nil, err
		}
		m.Dropped += uint64(skip)
		for _, ln := range lines[:skip] {
			m.DropAt = max(m.DropAt, ln.Time.UnixMicro())
		}
		m.Next += uint64(skip)
		m.First = m.Next
		lines, codes = lines[skip:], codes[skip:]
	}
	stored := make([]Entry, 0, len(lines))
	for i, ln := range lines {
		if err := tx.Put(Collection, at.lineKey(m.Next), encodeLine(codes[i], ln.Time, ln.Message)); err != nil {
			return nil, err
		}
		stored = append(stored, Entry{Seq: m.Next, Time: ln.Time, Level: ln.Level, Message: ln.Message})
		m.Next++
		m.Bytes += len(ln.Message)
	}
	if int(m.Next-m.First) > l.o.MaxLines || m.Bytes > l.o.MaxBytes {
		if err := l.drop(tx, at, &m, 0); err != nil {
			return nil, err
		}
	}
	b, err := json.Marshal(&m)
	if err != nil {
		return nil, err
	}
	return stored, tx.Put(Collection, at.meta, b)
}

// drop deletes the oldest lines of a log: those before seq upTo, or, when
// upTo is 0, as many as it takes to bring the log within its bounds.
func (l *Logs) drop(tx store.Tx, at logAt, m *meta, upTo uint64) error {
	var ks []string
	count, size := int(m.Next-m.First), m.Bytes
	err := tx.Scan(Collection, at.lines(), nil, func(k string, v []byte) (bool, error) {
		if upTo == 0 && count <= l.o.MaxLines && size <= l.o.MaxBytes {
			return false, nil
		}
		_, at, msg, err := decodeLine(v)
		if err != nil {
			return false, err
		}
		ks = append(ks, k)
		count--
		size -= len(msg)
		m.Dropped++
		m.DropAt = max(m.DropAt, at.UnixMicro())
		return true, nil
	})
	if err != nil {
		return err
	}
	for _, k := range ks {
		if err := tx.Delete(Collection, k); err != nil {
			return err
		}
	}
	m.First += uint64(len(ks))
	m.Bytes = size
	return nil
}

// DeleteDeployment deletes every log of every revision of a deployment,
// under the text keys and, when tenantPrefix is the tenant's prefix, the
// compact ones.
func DeleteDeployment(tx store.Tx, tenant, tenantPrefix, deployment string) error {
	var ks []string
	prefixes := []string{tenant + "/" + deployment + "/"}
	if keyenc.TenantLen(tenantPrefix) > 0 {
		prefixes = append(prefixes, tenantPrefix+keyenc.ID(deployment))
	}
	for _, p := range prefixes {
		err := tx.Scan(Collection, p, nil, func(k string, _ []byte) (bool, error) {
			ks = append(ks, k)
			return true, nil
		})
		if err != nil {
			return err
		}
	}
	for _, k := range ks {
		if err := tx.Delete(Collection, k); err != nil {
			return err
		}
	}
	return nil
}

// Filter chooses the lines of a page.
type Filter struct {
	// Desc reads newest first.
	Desc bool
	// Limit is the most lines of the page; 0 or less means 1.
	Limit int
	// After, when not nil, is the place of an earlier page's last line
	// (Entry.Seq) in the same order: the page starts after it.
	After *uint64
	// Level, when not "", keeps the lines of that level only.
	Level Level
	// Query, when not "", keeps the lines whose message contains it,
	// ignoring case.
	Query string
	// Start and End, when not zero, keep the lines with Start <= time < End.
	Start, End time.Time
}

func (f *Filter) match(query string, level Level, at time.Time, msg []byte) bool {
	if f.Level != "" && level != f.Level {
		return false
	}
	if !f.Start.IsZero() && at.Before(f.Start) {
		return false
	}
	if !f.End.IsZero() && !at.Before(f.End) {
		return false
	}
	return query == "" || strings.Contains(strings.ToLower(string(msg)), query)
}

// List reads one page of the log k: its lines in write order, or the
// reverse with f.Desc, that f keeps, at most f.Limit. A log that dropped
// lines answers, in their place (at the place before its oldest line
// kept), one Warning line counting them, stamped with the time of the
// newest dropped line, which pages and filters like any other. A log never
// written is empty. The page is never nil.
func (l *Logs) List(r store.Reader, k Key, f *Filter) ([]Entry, error) {
	res, err := l.list(r, k, f, 0)
	return res.page, err
}

// listed is what list read of one log.
type listed struct {
	page []Entry
	// read is how many stored lines list read (matching f or not).
	read int
	// last is the place of the last line read, the marker of dropped
	// lines included (when read or page is not empty).
	last uint64
	// end: list reached the end of the log in f's order (the page is not
	// full, and the budget did not run out).
	end bool
}

// list is List reading at most budget stored lines (0: no bound).
func (l *Logs) list(r store.Reader, k Key, f *Filter, budget int) (listed, error) {
	at, m, found, err := locate(r, k)
	if err != nil || !found {
		return listed{page: []Entry{}, end: true}, err
	}
	return l.listAt(r, at, m, f, budget)
}

// listAt is list of the log at loc, whose meta record is m.
func (l *Logs) listAt(r store.Reader, loc logAt, m meta, f *Filter, budget int) (listed, error) {
	res := listed{page: []Entry{}}
	var err error
	limit := max(f.Limit, 1)
	query := strings.ToLower(f.Query)
	marker := func() {
		if m.Dropped == 0 || len(res.page) == limit {
			return
		}
		seq := m.First - 1
		if f.After != nil && (f.Desc && seq >= *f.After || !f.Desc && seq <= *f.After) {
			return
		}
		res.last = seq
		at := time.UnixMicro(m.DropAt).UTC()
		msg := fmt.Sprintf("%d earlier lines dropped: this log keeps its last %d lines and %d bytes of messages",
			m.Dropped, l.o.MaxLines, l.o.MaxBytes)
		if !f.match(query, Warning, at, []byte(msg)) {
			return
		}
		res.page = append(res.page, Entry{Seq: seq, Dropped: m.Dropped, Time: at, Level: Warning, Message: msg})
	}
	opts := &store.ScanOptions{Reverse: f.Desc}
	switch {
	case f.After != nil && f.Desc && *f.After <= 1:
		opts = nil // nothing before the first line
	case f.After != nil && f.Desc:
		opts.Start = loc.lineKey(*f.After - 1)
	case f.After != nil:
		opts.Start = loc.lineKey(*f.After + 1)
	}
	if !f.Desc {
		marker()
	}
	scanned := opts == nil // the lines were read to the end
	if opts != nil && len(res.page) < limit {
		err = r.Scan(Collection, loc.lines(), opts, func(k string, v []byte) (bool, error) {
			if budget > 0 && res.read == budget {
				return false, nil // more lines wait: the budget ran out
			}
			seq, err := loc.seq(k)
			if err != nil {
				return false, err
			}
			level, at, msg, err := decodeLine(v)
			if err != nil {
				return false, err
			}
			res.read++
			res.last = seq
			if f.match(query, level, at, msg) {
				res.page = append(res.page, Entry{Seq: seq, Time: at, Level: level, Message: string(msg)})
			}
			return len(res.page) < limit, nil
		})
		if err != nil {
			return listed{}, err
		}
		scanned = len(res.page) < limit && (budget == 0 || res.read < budget)
	}
	if f.Desc && scanned {
		marker()
	}
	res.end = scanned && len(res.page) < limit
	return res, nil
}

// EncodeOffset and DecodeOffset are the opaque offsets of pages: the
// order of the page and the place of its last line. ok is false for a
// string EncodeOffset cannot have made.
func EncodeOffset(desc bool, seq uint64) string {
	o := byte('a')
	if desc {
		o = 'd'
	}
	return base64.RawURLEncoding.EncodeToString(strconv.AppendUint([]byte{'1', o}, seq, 10))
}

// DecodeOffset decodes an EncodeOffset string.
func DecodeOffset(s string) (desc bool, seq uint64, ok bool) {
	if len(s) > 32 {
		return false, 0, false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) < 3 || b[0] != '1' || (b[1] != 'a' && b[1] != 'd') {
		return false, 0, false
	}
	seq, err = strconv.ParseUint(string(b[2:]), 10, 64)
	if err != nil || EncodeOffset(b[1] == 'd', seq) != s {
		return false, 0, false // one spelling per position (base64 skips line breaks; numbers have leading zeros)
	}
	return b[1] == 'd', seq, true
}

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
// Storage:
//
//	cp_revision_logs  tenant/deployment/revision/b          -> meta JSON (b: build, d: deploy)
//	cp_revision_logs  tenant/deployment/revision/b/seq      -> line: 1, level code, 8 bytes Unix micros (big-endian), message
//
// seq is 16 hex digits, from 1, so that key order is write order. The meta
// record holds the next seq, the first seq kept, the bytes of messages kept
// and what was dropped. A write is one Get of the meta record and one Put
// per line and of the meta; dropping reads and deletes only the lines it
// drops. DeleteDeployment deletes a deployment's logs with one prefix scan.
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
}

func (k Key) prefix() string {
	return strings.Join([]string{k.Tenant, k.Deployment, k.Revision, string(k.Kind)}, "/")
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

func lineKey(prefix string, seq uint64) string { return fmt.Sprintf("%s/%016x", prefix, seq) }

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
	prefix := k.prefix()
	m, _, err := readMeta(tx, prefix)
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
		if err := l.drop(tx, prefix, &m, m.Next); err != nil {
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
		if err := tx.Put(Collection, lineKey(prefix, m.Next), encodeLine(codes[i], ln.Time, ln.Message)); err != nil {
			return nil, err
		}
		stored = append(stored, Entry{Seq: m.Next, Time: ln.Time, Level: ln.Level, Message: ln.Message})
		m.Next++
		m.Bytes += len(ln.Message)
	}
	if int(m.Next-m.First) > l.o.MaxLines || m.Bytes > l.o.MaxBytes {
		if err := l.drop(tx, prefix, &m, 0); err != nil {
			return nil, err
		}
	}
	b, err := json.Marshal(&m)
	if err != nil {
		return nil, err
	}
	return stored, tx.Put(Collection, prefix, b)
}

// drop deletes the oldest lines of a log: those before seq upTo, or, when
// upTo is 0, as many as it takes to bring the log within its bounds.
func (l *Logs) drop(tx store.Tx, prefix string, m *meta, upTo uint64) error {
	var ks []string
	count, size := int(m.Next-m.First), m.Bytes
	err := tx.Scan(Collection, prefix+"/", nil, func(k string, v []byte) (bool, error) {
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

// DeleteDeployment deletes every log of every revision of a deployment.
func DeleteDeployment(tx store.Tx, tenant, deployment string) error {
	var ks []string
	err := tx.Scan(Collection, tenant+"/"+deployment+"/", nil, func(k string, _ []byte) (bool, error) {
		ks = append(ks, k)
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
	res := listed{page: []Entry{}}
	prefix := k.prefix()
	m, found, err := readMeta(r, prefix)
	if err != nil || !found {
		res.end = true
		return res, err
	}
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
		opts.Start = lineKey(prefix, *f.After-1)
	case f.After != nil:
		opts.Start = lineKey(prefix, *f.After+1)
	}
	if !f.Desc {
		marker()
	}
	scanned := opts == nil // the lines were read to the end
	if opts != nil && len(res.page) < limit {
		err = r.Scan(Collection, prefix+"/", opts, func(k string, v []byte) (bool, error) {
			if budget > 0 && res.read == budget {
				return false, nil // more lines wait: the budget ran out
			}
			level, at, msg, err := decodeLine(v)
			if err != nil {
				return false, err
			}
			seq, err := strconv.ParseUint(k[len(prefix)+1:], 16, 64)
			if err != nil {
				return false, fmt.Errorf("revlog: malformed log key %q", k)
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

package httphandler

import (
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// LogFormat is the line format of NewLogHandler.
type LogFormat int

const (
	// LogText is the format of slog.NewTextHandler: key=value pairs, one
	// record a line.
	LogText LogFormat = iota
	// LogJSON is the format of slog.NewJSONHandler: a JSON object a line.
	LogJSON
)

// NewLogHandler returns a slog.Handler that writes to w the lines
// slog.NewTextHandler(w, nil) (LogText) or slog.NewJSONHandler(w, nil)
// (LogJSON) would write: every record at Info and above, with the same
// keys, values and quoting.
//
// Its use is as the handler of Options.Logger
// (slog.New(NewLogHandler(os.Stderr, LogJSON))): the Handler then writes
// its request records itself, the very lines slog would write, formatted
// by an encoder made for them (several times cheaper than slog's general
// one) and written in batches, many lines a Write, from the request log's
// goroutine. Every other record, and every record of a Logger derived from
// it (With, WithGroup), goes through slog's own handler. All writes to w
// are serialized, so lines never interleave, and w needs no lock of its
// own.
func NewLogHandler(w io.Writer, format LogFormat) slog.Handler {
	out := &serialWriter{w: w}
	h := &logHandler{out: out, json: format == LogJSON}
	if h.json {
		h.Handler = slog.NewJSONHandler(out, nil)
	} else {
		h.Handler = slog.NewTextHandler(out, nil)
	}
	return h
}

// logHandler is NewLogHandler's handler: slog's, writing through out,
// which the request log writes its batches to as well.
type logHandler struct {
	slog.Handler // WithAttrs and WithGroup answer slog's own handlers
	out          *serialWriter
	json         bool
}

// serialWriter serializes the writes to w.
type serialWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *serialWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// requestRecord is what the log says of a request.
type requestRecord struct {
	time     time.Time
	duration time.Duration
	status   int
	method   string
	path     string // logPath: without the query, cut
	id       string
	tenant   string
}

// requestMessage is the message of request records.
const requestMessage = "request"

// slogRecord is r as a slog.Record, for a Logger's handler.
func (r *requestRecord) slogRecord() slog.Record {
	rec := slog.NewRecord(r.time, slog.LevelInfo, requestMessage, 0)
	rec.AddAttrs(slog.String("method", r.method), slog.String("path", r.path), slog.Int("status", r.status),
		slog.Duration("duration", r.duration), slog.String("request_id", r.id),
		slog.String("tenant", r.tenant))
	return rec
}

// appendJSON appends r's line as slog.NewJSONHandler(w, nil) writes it.
func (r *requestRecord) appendJSON(b []byte) []byte {
	b = append(b, `{"time":"`...)
	b = r.time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"INFO","msg":"`+requestMessage+`","method":`...)
	b = appendJSONString(b, r.method)
	b = append(b, `,"path":`...)
	b = appendJSONString(b, r.path)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(r.status), 10)
	b = append(b, `,"duration":`...)
	b = strconv.AppendInt(b, int64(r.duration), 10)
	b = append(b, `,"request_id":`...)
	b = appendJSONString(b, r.id)
	b = append(b, `,"tenant":`...)
	b = appendJSONString(b, r.tenant)
	return append(b, "}\n"...)
}

// appendText appends r's line as slog.NewTextHandler(w, nil) writes it.
func (r *requestRecord) appendText(b []byte) []byte {
	b = append(b, "time="...)
	b = appendRFC3339Millis(b, r.time)
	b = append(b, " level=INFO msg="+requestMessage+" method="...)
	b = appendTextString(b, r.method)
	b = append(b, " path="...)
	b = appendTextString(b, r.path)
	b = append(b, " status="...)
	b = strconv.AppendInt(b, int64(r.status), 10)
	b = append(b, " duration="...)
	b = append(b, r.duration.String()...)
	b = append(b, " request_id="...)
	b = appendTextString(b, r.id)
	b = append(b, " tenant="...)
	b = appendTextString(b, r.tenant)
	return append(b, '\n')
}

// appendRFC3339Millis is slog's text time: RFC 3339 with exactly three
// fractional digits.
func appendRFC3339Millis(b []byte, t time.Time) []byte {
	const prefixLen = len("2006-01-02T15:04:05.000")
	n := len(b)
	// RFC3339Nano trims trailing zeros: a tenth of a millisecond more
	// makes four digits, of which the fourth is dropped.
	t = t.Truncate(time.Millisecond).Add(time.Millisecond / 10)
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b[:n+prefixLen], b[n+prefixLen+1:]...)
}

const hexDigits = "0123456789abcdef"

// jsonSafe reports whether the ASCII byte c goes into a JSON string as it
// is (as slog's JSON handler has it: no HTML escaping).
func jsonSafe(c byte) bool { return c >= 0x20 && c != '"' && c != '\\' }

// appendJSONString appends s quoted as slog's JSON handler quotes strings:
// invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if jsonSafe(c) {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendTextString appends s as slog's text handler does: as it is, or
// quoted (strconv.Quote) when empty or holding a space, '=', '"', a
// control character or a rune that is invalid, a space or not printable.
func appendTextString(b []byte, s string) []byte {
	if textNeedsQuoting(s) {
		return strconv.AppendQuote(b, s)
	}
	return append(b, s...)
}

func textNeedsQuoting(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c != '\\' && (c == ' ' || c == '=' || !jsonSafe(c)) {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError || unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return true
		}
		i += size
	}
	return false
}

package imagebuild

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// jvalue is a JSON value that keeps the order of object members, so that
// it can be written back the way Python's json.dumps writes what
// json.load read (the langgraph CLI puts json.dumps of parts of
// langgraph.json into the Dockerfile).
type jvalue struct {
	kind byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	obj  []jmember
	arr  []*jvalue
	str  string // string, or the number's literal
	b    bool
}

type jmember struct {
	key string
	val *jvalue
}

// parseJSON decodes one JSON document keeping member order.
func parseJSON(data []byte) (*jvalue, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("invalid JSON: data after the top-level value")
	}
	return v, nil
}

const maxJSONDepth = 100

func decodeValue(dec *json.Decoder, depth int) (*jvalue, error) {
	if depth > maxJSONDepth {
		return nil, errors.New("invalid JSON: nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			v := &jvalue{kind: 'o'}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("invalid JSON: %w", err)
				}
				k, _ := kt.(string)
				val, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				v.set(k, val) // a repeated key keeps its first place and last value, as in Python
			}
			_, err := dec.Token()
			return v, err
		case '[':
			v := &jvalue{kind: 'a'}
			for dec.More() {
				e, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				v.arr = append(v.arr, e)
			}
			_, err := dec.Token()
			return v, err
		}
		return nil, fmt.Errorf("invalid JSON: unexpected %v", t)
	case string:
		return &jvalue{kind: 's', str: t}, nil
	case json.Number:
		return &jvalue{kind: 'n', str: t.String()}, nil
	case bool:
		return &jvalue{kind: 'b', b: t}, nil
	case nil:
		return &jvalue{kind: 'z'}, nil
	}
	return nil, fmt.Errorf("invalid JSON: unexpected token %v", tok)
}

// get returns the member k of an object, or nil.
func (v *jvalue) get(k string) *jvalue {
	if v == nil || v.kind != 'o' {
		return nil
	}
	for _, m := range v.obj {
		if m.key == k {
			return m.val
		}
	}
	return nil
}

// set replaces or appends the member k of an object.
func (v *jvalue) set(k string, val *jvalue) {
	for i := range v.obj {
		if v.obj[i].key == k {
			v.obj[i].val = val
			return
		}
	}
	v.obj = append(v.obj, jmember{k, val})
}

// isNone reports whether v is absent or null (Python's "is None").
func (v *jvalue) isNone() bool { return v == nil || v.kind == 'z' }

// truthy is Python's truth value of v.
func (v *jvalue) truthy() bool {
	if v == nil {
		return false
	}
	switch v.kind {
	case 'o':
		return len(v.obj) > 0
	case 'a':
		return len(v.arr) > 0
	case 's':
		return v.str != ""
	case 'b':
		return v.b
	case 'n':
		f, err := strconv.ParseFloat(v.str, 64)
		return err != nil || f != 0
	}
	return false
}

// stringOr returns v's string, or def when v is not a string.
func (v *jvalue) stringOr(def string) string {
	if v == nil || v.kind != 's' {
		return def
	}
	return v.str
}

// dumps writes v as Python's json.dumps(v) does: ", " and ": "
// separators, non-ASCII escaped, floats as Python's repr.
func (v *jvalue) dumps() string {
	var b strings.Builder
	v.dump(&b)
	return b.String()
}

func (v *jvalue) dump(b *strings.Builder) {
	switch v.kind {
	case 'o':
		b.WriteByte('{')
		for i, m := range v.obj {
			if i > 0 {
				b.WriteString(", ")
			}
			pyQuote(b, m.key)
			b.WriteString(": ")
			m.val.dump(b)
		}
		b.WriteByte('}')
	case 'a':
		b.WriteByte('[')
		for i, e := range v.arr {
			if i > 0 {
				b.WriteString(", ")
			}
			e.dump(b)
		}
		b.WriteByte(']')
	case 's':
		pyQuote(b, v.str)
	case 'n':
		b.WriteString(pyNumber(v.str))
	case 'b':
		if v.b {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	default:
		b.WriteString("null")
	}
}

// pyQuote writes s as json.dumps does with ensure_ascii.
func pyQuote(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20 || r == utf8.RuneError:
				fmt.Fprintf(b, `\u%04x`, r)
			case r < 0x7f:
				b.WriteRune(r)
			case r < 0x10000:
				fmt.Fprintf(b, `\u%04x`, r)
			default:
				r -= 0x10000
				fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			}
		}
	}
	b.WriteByte('"')
}

// pyNumber formats a JSON number literal as Python prints what json.load
// made of it: integers as they are, other numbers as float repr.
func pyNumber(lit string) string {
	if !strings.ContainsAny(lit, ".eE") {
		if lit == "-0" {
			return "0" // an int in Python
		}
		return lit
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) {
		if math.IsInf(f, 1) {
			return "Infinity"
		} else if math.IsInf(f, -1) {
			return "-Infinity"
		}
		return lit
	}
	return pyFloatRepr(f)
}

// pyFloatRepr is Python's repr of a float: the shortest digits that
// round-trip, positional for exponents -4..15, otherwise scientific with a
// signed two-digit-minimum exponent, always with a '.' or an exponent.
func pyFloatRepr(f float64) string {
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddddde±XX
	mant, exps, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(exps)
	neg := strings.HasPrefix(mant, "-")
	mant = strings.TrimPrefix(mant, "-")
	digits := strings.Replace(mant, ".", "", 1)
	sign := ""
	if neg {
		sign = "-"
	}
	if exp < -4 || exp >= 16 {
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		es := "+"
		if exp < 0 {
			es = "-"
			exp = -exp
		}
		return fmt.Sprintf("%s%se%s%02d", sign, m, es, exp)
	}
	var s string
	switch {
	case exp < 0:
		s = "0." + strings.Repeat("0", -exp-1) + digits
	case exp+1 >= len(digits):
		s = digits + strings.Repeat("0", exp+1-len(digits)) + ".0"
	default:
		s = digits[:exp+1] + "." + digits[exp+1:]
	}
	return sign + s
}

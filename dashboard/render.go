package dashboard

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/deployplane/deployplane/apierr"
	"github.com/deployplane/deployplane/wiretime"
)

// view is what every page template gets.
type view struct {
	Title string
	Base  string   // the dashboard's path, BasePath + "/ui"
	Sess  *session // nil on the sign-in page
	Nav   string   // the navigation entry of the page
	// Live is the URL of the page's live stream ("" for none); app.js
	// follows it.
	Live string
	Data any
	Form *form
}

// form is a form's values and its problems, each beside its field.
type form struct {
	Values   url.Values
	Problems map[string][]string
	General  []string // problems that name no field of the form
	Action   string   // which form of the page the problems belong to
}

// Get is a value of the form.
func (f *form) Get(k string) string {
	if f == nil {
		return ""
	}
	return f.Values.Get(k)
}

// Err lists the problems of a field.
func (f *form) Err(k string) []string {
	if f == nil {
		return nil
	}
	return f.Problems[k]
}

// In lists the problems of a field when they are those of action (a page
// with several forms shows each problem beside its own form's field).
func (f *form) In(action, field string) []string {
	if !f.Is(action) {
		return nil
	}
	return f.Problems[field]
}

// Is reports whether the problems are those of action.
func (f *form) Is(action string) bool { return f != nil && f.Action == action }

// add records a problem at a field ("" for none).
func (f *form) add(field, msg string) {
	if field == "" {
		f.General = append(f.General, msg)
		return
	}
	if f.Problems == nil {
		f.Problems = map[string][]string{}
	}
	f.Problems[field] = append(f.Problems[field], msg)
}

// failed reports whether the form has problems.
func (f *form) failed() bool { return len(f.Problems) > 0 || len(f.General) > 0 }

// fromValidation places every problem of a 422 beside its field: the last
// string of its loc that names a field of the form, else among the general
// ones, with its loc spelled out.
func (f *form) fromValidation(ve *apierr.ValidationError, fields map[string]string) {
	for _, p := range ve.Problems {
		if field := fieldOf(p.Loc, fields); field != "" {
			f.add(field, p.Msg)
			continue
		}
		f.add("", locString(p.Loc)+": "+p.Msg)
	}
}

// fieldOf is the form field a loc names: a problem inside secrets is the
// secrets field's, one inside resource_spec the field of the spec member
// it names (or resource_spec's), else the last string of the loc that is
// a field.
func fieldOf(loc []any, fields map[string]string) string {
	for i, e := range loc {
		switch e {
		case "secrets":
			return fields["secrets"]
		case "resource_spec":
			if i+1 < len(loc) {
				if n, ok := loc[i+1].(string); ok && fields[n] != "" {
					return fields[n]
				}
			}
			return fields["resource_spec"]
		}
	}
	for i := len(loc) - 1; i >= 0; i-- {
		if s, ok := loc[i].(string); ok && fields[s] != "" {
			return fields[s]
		}
	}
	return ""
}

// locString spells a loc as a dotted path.
func locString(loc []any) string {
	parts := make([]string, 0, len(loc))
	for _, e := range loc {
		parts = append(parts, fmt.Sprint(e))
	}
	return strings.Join(parts, ".")
}

// timeLayout is how the pages show a time.
const timeLayout = "2006-01-02 15:04:05 UTC"

// str is *p, "" for nil.
func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

var funcs = template.FuncMap{
	"badge": badgeClass,
	"when": func(t wiretime.Time) string {
		return t.Time().UTC().Format(timeLayout)
	},
	"iso":   func(t wiretime.Time) string { return t.Time().UTC().Format(time.RFC3339Nano) },
	"str":   str,
	"on":    func(b *bool) bool { return b != nil && *b },
	"lower": strings.ToLower,
	"add":   func(a, b int) int { return a + b },
	"seq": func(n int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = i
		}
		return s
	},
}

// badgeClass is the class of a status badge: ok, fail or wait.
func badgeClass(status any) string {
	s := fmt.Sprint(status)
	switch {
	case s == "DEPLOYED" || s == "READY":
		return "badge badge-ok"
	case strings.HasSuffix(s, "_FAILED") || s == "INTERRUPTED" || s == "UNKNOWN":
		return "badge badge-fail"
	case s == "SKIPPED" || s == "UNUSED" || s == "AWAITING_DELETE":
		return "badge badge-off"
	default:
		return "badge badge-wait"
	}
}

// pageNames are the templates of templates/, each executed through
// layout.html.
var pageNames = []string{"signin", "workspace", "deployments", "new", "deployment", "revision", "rollback", "listeners", "error"}

// parsePages parses every page with the layout.
func parsePages() map[string]*template.Template {
	base := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html"))
	pages := map[string]*template.Template{}
	for _, n := range pageNames {
		pages[n] = template.Must(template.Must(base.Clone()).ParseFS(templateFS, "templates/"+n+".html"))
	}
	return pages
}

// render writes a page.
func (h *Handler) render(w http.ResponseWriter, status int, name string, v *view) {
	v.Base = h.base
	var buf bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&buf, "layout.html", v); err != nil {
		h.log.Error("dashboard: rendering a page", "page", name, "err", err)
		http.Error(w, "Internal Server Error", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Content-Length", strconv.Itoa(buf.Len()))
	if hd.Get("Cache-Control") == "" {
		hd.Set("Cache-Control", "no-store")
	}
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// renderError writes the error page.
func (h *Handler) renderError(w http.ResponseWriter, _ *http.Request, sess *session, status int, msg string) {
	h.render(w, status, "error", &view{Title: http.StatusText(status), Sess: sess,
		Data: struct {
			Status int
			Text   string
			Msg    string
		}{status, http.StatusText(status), msg}})
}

package deployk8s

import (
	"regexp"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// templateGrammar is the templates' grammar, stated apart from the
// parser: text without braces, and the known placeholders.
var templateGrammar = regexp.MustCompile(`^(?:[^{}]|\{(?:name|id|namespace|tenant)\})*$`)

// TestTemplateProperties: a template parses exactly when it follows the
// grammar; a parsed one uses a placeholder exactly when its text holds
// it, and rendering it with each placeholder's own text as its value
// gives the template back (values are put in once, never expanded again,
// and the text between them is kept).
func TestTemplateProperties(t *testing.T) {
	pieces := []string{"a", "Z", "0", ".", "-", "/", "_", "{", "}", "{name}", "{id}", "{namespace}", "{tenant}",
		"{nope}", "{}", "{NAME}", "{{id}}", "name", "é"}
	rapid.Check(t, func(t *rapid.T) {
		s := strings.Join(rapid.SliceOfN(rapid.SampledFrom(pieces), 0, 12).Draw(t, "pieces"), "")
		tm, err := parseTemplate(s)
		if ok := templateGrammar.MatchString(s); ok != (err == nil) {
			t.Fatalf("parseTemplate(%q): %v; the grammar says valid=%t", s, err, ok)
		}
		if err != nil {
			return
		}
		self := map[string]string{}
		for _, k := range placeholders {
			self[k] = "{" + k + "}"
			if tm.uses(k) != strings.Contains(s, self[k]) {
				t.Fatalf("%q uses {%s}: %t", s, k, tm.uses(k))
			}
		}
		if got := tm.render(self); got != s {
			t.Fatalf("rendering %q with the placeholders' own text gives %q", s, got)
		}
	})
}

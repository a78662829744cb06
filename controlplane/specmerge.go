package controlplane

import (
	"encoding/json"
	"reflect"
	"strings"

	"github.com/deployplane/deployplane/apierr"
)

var resourceSpecType = reflect.TypeFor[ResourceSpec]()

// mergeSpec is the resource_spec of a PATCH with MergeResourceSpec: the
// stored spec with patch merged in as RFC 7396 says (patch's non-null
// members replace stored's, objects such as labels merge member by member,
// lists replace), then the members remove names (paths below resource_spec,
// "cpu" or "labels.team") taken out. A path whose first member is no
// member of ResourceSpec is a problem. An empty result is nil.
func mergeSpec(stored, patch *ResourceSpec, remove [][]string) (*ResourceSpec, []apierr.Problem) {
	base, over := specMap(stored), specMap(patch)
	mergeObjects(base, over)
	var ps []apierr.Problem
	for _, path := range remove {
		if _, ok := jsonField(resourceSpecType, path[0]); !ok {
			ps = append(ps, apierr.Problem{Loc: bodyLoc(locResourceSpec, stringsToAny(path)...), Type: apierr.TypeValueError,
				Msg: "Field cannot be removed: no such field"})
			continue
		}
		obj := base
		for _, k := range path[:len(path)-1] {
			next, _ := obj[k].(map[string]any)
			if next == nil {
				obj = nil
				break
			}
			obj = next
		}
		delete(obj, path[len(path)-1]) // a no-op for a member that is not there
	}
	if len(ps) > 0 || len(base) == 0 {
		return nil, ps
	}
	b, err := json.Marshal(base)
	if err != nil {
		return nil, []apierr.Problem{{Loc: bodyLoc(locResourceSpec), Type: apierr.TypeValueError, Msg: err.Error()}}
	}
	var out ResourceSpec
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, []apierr.Problem{{Loc: bodyLoc(locResourceSpec), Type: apierr.TypeValueError, Msg: err.Error()}}
	}
	return &out, nil
}

// specMap is s as a JSON object without its null members (nil s: empty).
func specMap(s *ResourceSpec) map[string]any {
	m := map[string]any{}
	if s == nil {
		return m
	}
	b, err := json.Marshal(s)
	if err != nil {
		return m // a ResourceSpec always encodes
	}
	_ = json.Unmarshal(b, &m)
	dropNulls(m)
	return m
}

func dropNulls(m map[string]any) {
	for k, v := range m {
		switch v := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			dropNulls(v)
		}
	}
}

// mergeObjects merges over into base as RFC 7396 does (over holds no
// nulls): objects member by member, any other value replaced.
func mergeObjects(base, over map[string]any) {
	for k, v := range over {
		if vo, ok := v.(map[string]any); ok {
			if bo, ok := base[k].(map[string]any); ok {
				mergeObjects(bo, vo)
				continue
			}
		}
		base[k] = v
	}
}

func stringsToAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// specRemovals are the paths of remove below resource_spec, relative to
// it.
func specRemovals(remove []string) [][]string {
	prefix := strings.Join(locResourceSpec, ".") + "."
	var out [][]string
	for _, p := range remove {
		if rest, ok := strings.CutPrefix(p, prefix); ok && rest != "" {
			out = append(out, strings.Split(rest, "."))
		}
	}
	return out
}

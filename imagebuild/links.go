package imagebuild

import (
	"slices"
	"strings"
)

// linkSet is the symbolic links of a tree being written (a tarball
// unpacked, a commit checked out), kept to check, once the tree is
// whole, that no link leads outside its root: a link is resolved on the
// tree as written, through the links it passes, not as text.
type linkSet struct {
	targets map[string]string // by clean path below the root
	order   []string          // the paths in the order they were added
}

// add records the link at p (a clean path) with its target.
func (s *linkSet) add(p, target string) {
	if s.targets == nil {
		s.targets = map[string]string{}
	}
	if _, ok := s.targets[p]; !ok {
		s.order = append(s.order, p)
	}
	s.targets[p] = target
}

// remove forgets the link at p, if there is one.
func (s *linkSet) remove(p string) {
	if _, ok := s.targets[p]; ok {
		delete(s.targets, p)
		s.order = slices.DeleteFunc(s.order, func(l string) bool { return l == p })
	}
}

// resolution is where a symbolic link leads on the tree as written.
type resolution struct {
	path    string // below the root, "" for the root itself
	escapes bool   // some step leaves the root
	loops   bool   // it never ends (the kernel would say ELOOP): it leads nowhere
	busy    bool   // being resolved (a link met again while busy loops)
}

// escaping returns the first link (in the order added) that leads
// outside the root, and whether there is one. An absolute or empty
// target leads outside. Each link's target is walked once (resolutions
// are kept), so the work is linear in the targets' lengths.
func (s *linkSet) escaping() (string, bool) {
	memo := make(map[string]*resolution, len(s.targets))
	for _, p := range s.order {
		if s.resolve(p, memo).escapes {
			return p, true
		}
	}
	return "", false
}

// resolve is where the link at p leads: its target, walked name by name
// from the link's directory, each name that is a link replaced by that
// link's resolution. Names not written count as directories (as text);
// so does a name that is a file, which makes the walk stricter than the
// kernel's (which would stop there), never looser.
func (s *linkSet) resolve(p string, memo map[string]*resolution) *resolution {
	if r := memo[p]; r != nil {
		if r.busy {
			return &resolution{loops: true}
		}
		return r
	}
	r := &resolution{busy: true}
	memo[p] = r
	target := s.targets[p]
	if target == "" || strings.HasPrefix(target, "/") || strings.ContainsRune(target, 0) {
		*r = resolution{escapes: true}
		return r
	}
	cur := p[:max(strings.LastIndexByte(p, '/'), 0)]
	for name := range strings.SplitSeq(target, "/") {
		switch name {
		case "", ".":
			continue
		case "..":
			if cur == "" {
				*r = resolution{escapes: true}
				return r
			}
			cur = cur[:max(strings.LastIndexByte(cur, '/'), 0)]
			continue
		}
		if cur == "" {
			cur = name
		} else {
			cur += "/" + name
		}
		if _, ok := s.targets[cur]; !ok {
			continue
		}
		next := s.resolve(cur, memo)
		if next.escapes || next.loops {
			*r = resolution{escapes: next.escapes, loops: next.loops}
			return r
		}
		cur = next.path
	}
	*r = resolution{path: cur}
	return r
}

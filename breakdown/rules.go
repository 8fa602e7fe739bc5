package breakdown

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/snapshot"
)

// Rule is one of the user's own rules: blocks whose allocation matches it
// get Category, before any built-in rule.
type Rule struct {
	Category Category
	// On is what the pattern is matched against: "frame" (each frame of
	// the allocation stack as "function (file:line)"), "annotation" (the
	// record_function ranges open at the allocation) or "metadata" (the
	// allocation's user_metadata string).
	On      string
	Pattern *regexp.Regexp
	Line    int // in the rules file
}

// ParseRules reads a rules file: one rule a line, "NAME ON REGEX", where ON
// is frame, annotation or metadata and REGEX (Go syntax) is the rest of the
// line; blank lines and lines starting with # are skipped. Rules are tried
// in file order and the first match wins. A NAME that is a built-in
// category (parameter, activation, ...) files blocks there; any other name
// is a category of its own.
func ParseRules(r io.Reader) ([]Rule, error) {
	var out []Rule
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 3 {
			return nil, fmt.Errorf("rules line %d: want NAME frame|annotation|metadata REGEX, got %q", n, line)
		}
		name, on := fields[0], fields[1]
		if on != "frame" && on != "annotation" && on != "metadata" {
			return nil, fmt.Errorf("rules line %d: %q is not frame, annotation or metadata", n, on)
		}
		if !validName.MatchString(name) {
			return nil, fmt.Errorf("rules line %d: name %q: use letters, digits and _", n, name)
		}
		expr := strings.TrimSpace(strings.SplitN(strings.TrimSpace(line[len(name):]), on, 2)[1])
		re, err := regexp.Compile(expr)
		if err != nil {
			return nil, fmt.Errorf("rules line %d: %w", n, err)
		}
		out = append(out, Rule{Category: Category(name), On: on, Pattern: re, Line: n})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading rules: %w", err)
	}
	return out, nil
}

var validName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)

// userRule applies the user's rules to a block.
func (c *classifier) userRule(a *replay.Allocation) (Label, bool) {
	for _, r := range c.opts.Rules {
		if what, ok := c.matches(r, a); ok {
			return Label{Category: r.Category, Rule: fmt.Sprintf("user:%d", r.Line), Evidence: r.On + " " + what}, true
		}
	}
	return Label{}, false
}

// matches returns what of a's allocation rule r matched.
func (c *classifier) matches(r Rule, a *replay.Allocation) (string, bool) {
	switch r.On {
	case "frame":
		if a.Stack == snapshot.NoStack {
			return "", false
		}
		for _, fid := range c.sn.Stack(a.Stack) {
			if s := c.sn.Frames[fid].String(); r.Pattern.MatchString(s) {
				return s, true
			}
		}
	case "annotation":
		if a.Start < 0 {
			return "", false
		}
		for _, w := range c.windows {
			if w.First > int(a.Start) {
				break
			}
			if int(a.Start) < w.End && r.Pattern.MatchString(w.Name) {
				return w.Name, true
			}
		}
	case "metadata":
		if md := c.metadataAt(int(a.Start)); md != "" && r.Pattern.MatchString(md) {
			return md, true
		}
	}
	return "", false
}

// metadataAt is event i's user_metadata string, "" without one.
func (c *classifier) metadataAt(i int) string {
	if i < 0 || i >= c.tr.Len() {
		return ""
	}
	id := c.tr.Context(i).UserMetadata
	if id == 0 {
		return ""
	}
	return c.sn.String(id)
}

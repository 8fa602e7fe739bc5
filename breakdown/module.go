package breakdown

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/vramscope/vramscope/snapshot"
)

// moduleTag finds the module's qualified name in a user_metadata string:
// what vramscope's hook writes ("module=model.layers.3.mlp"), or a user's
// own "mod=..." among other keys ("step=3;module=encoder").
var moduleTag = regexp.MustCompile(`(?:^|[;,\s{])"?(?:module|mod)"?\s*[=:]\s*"?([^;,"\s}]+)`)

// module names the module that allocated a block of stack si under
// user_metadata md: the exact name when the recording tagged forwards,
// else the chain of forward frames.
func (c *classifier) module(si *stackInfo, md snapshot.StringID) string {
	if md != 0 {
		if m := moduleTag.FindStringSubmatch(c.sn.String(md)); m != nil {
			return m[1]
		}
	}
	if len(si.modules) == 0 {
		return ""
	}
	names := make([]string, len(si.modules))
	for i, fr := range si.modules {
		names[i] = c.className(fr)
	}
	return strings.Join(names, " > ")
}

// className is the class whose method fr is, read from its source file;
// where the file cannot be read, "file.py:line" of the frame. The ranges
// of Classify ask at once (once per distinct label, rarely).
func (c *classifier) className(fr snapshot.Frame) string {
	c.classMu.Lock()
	defer c.classMu.Unlock()
	if n, ok := c.classes[fr]; ok {
		return n
	}
	n := ""
	if c.opts.Source != nil && fr.Line != snapshot.UnknownLine {
		n, _ = c.opts.Source.Class(fr.Filename, fr.Line)
	}
	if n == "" {
		n = fmt.Sprintf("%s:%d", path.Base(slash(fr.Filename)), fr.Line)
	}
	c.classes[fr] = n
	return n
}

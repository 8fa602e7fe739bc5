package main

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// docExample is one "$ vramscope ..." line of the manual in main.go's doc
// comment, with the exit code a "# exits N" remark promises (0 without).
type docExample struct {
	line string
	args []string
	code int
}

// docExamples extracts the manual's examples.
func docExamples(t *testing.T) []docExample {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	var out []docExample
	for _, line := range strings.Split(f.Doc.Text(), "\n") {
		_, cmdLine, ok := strings.Cut(line, "$ vramscope ")
		if !ok {
			continue
		}
		ex := docExample{line: strings.TrimSpace(line)}
		if before, remark, ok := strings.Cut(cmdLine, "# exits "); ok {
			cmdLine = before
			if ex.code, err = strconv.Atoi(strings.TrimSpace(remark)); err != nil {
				t.Fatalf("%q: bad exit remark: %v", line, err)
			}
		}
		ex.args = strings.Fields(cmdLine)
		out = append(out, ex)
	}
	return out
}

// TestDocExamples runs every example of the manual in-process on the
// shipped fixtures and checks its exit code, so the manual cannot drift
// from the commands (benchstat's doc_test). The examples name fixtures
// from the repository root; they run in a scratch directory that links to
// those fixtures, so the files they write land there.
func TestDocExamples(t *testing.T) {
	examples := docExamples(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	scratch := t.TempDir()
	for _, dir := range []string{"testdata", "snapshot"} {
		if err := os.Symlink(filepath.Join(root, dir), filepath.Join(scratch, dir)); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(scratch)

	commands := map[string]bool{}
	for _, ex := range examples {
		commands[ex.args[0]] = true
		code, stdout, stderr := runCmd(ex.args...)
		if code != ex.code {
			t.Errorf("%s: exit %d, want %d; stderr:\n%s", ex.line, code, ex.code, stderr)
		}
		if code == exitOK && stdout == "" && !strings.Contains(stderr, "wrote ") {
			t.Errorf("%s: no report on stdout and no file written", ex.line)
		}
	}
	// Every command has at least one example.
	for _, c := range []string{"analyze", "stats", "explain", "oom", "steps", "export"} {
		if !commands[c] {
			t.Errorf("the manual has no example of %s", c)
		}
	}
}

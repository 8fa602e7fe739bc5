// Package proctest writes a fake /proc tree, so that proc.Reader and what
// uses it are tested on scripted processes.
package proctest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Process is what a fake process shows in /proc.
type Process struct {
	PID        int
	StartTicks uint64
	Command    string            // comm
	Argv       []string          // cmdline
	UID        int               // status's Uid
	Cgroup     string            // the cgroup v2 path
	Env        map[string]string // environ
}

// Tree is a fake proc root in a test's temporary directory.
type Tree struct {
	t    testing.TB
	Root string
}

// New makes an empty tree.
func New(t testing.TB) *Tree { return &Tree{t: t, Root: t.TempDir()} }

// Start writes p's files, replacing those of an earlier process with the
// same pid.
func (tr *Tree) Start(p Process) {
	tr.t.Helper()
	dir := filepath.Join(tr.Root, strconv.Itoa(p.PID))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tr.t.Fatal(err)
	}
	var env []string
	for k, v := range p.Env {
		env = append(env, k+"="+v)
	}
	cgroup := p.Cgroup
	if cgroup == "" {
		cgroup = "/user.slice"
	}
	files := map[string]string{
		// Field 22 is the start time; the command may hold spaces.
		"stat":    fmt.Sprintf("%d (%s) S 1 1 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 %d 1000 100\n", p.PID, p.Command, p.StartTicks),
		"comm":    p.Command + "\n",
		"cmdline": strings.Join(p.Argv, "\x00") + "\x00",
		"status":  fmt.Sprintf("Name:\t%s\nUid:\t%d\t%d\t%d\t%d\n", p.Command, p.UID, p.UID, p.UID, p.UID),
		"cgroup":  "0::" + cgroup + "\n",
		"environ": strings.Join(env, "\x00"),
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			tr.t.Fatal(err)
		}
	}
}

// End removes pid's files: the process exited. Its stat is emptied first,
// as a reader holding it open must see the process gone (the kernel's
// stat answers ESRCH then).
func (tr *Tree) End(pid int) {
	tr.t.Helper()
	dir := filepath.Join(tr.Root, strconv.Itoa(pid))
	if err := os.WriteFile(filepath.Join(dir, "stat"), nil, 0o644); err != nil {
		tr.t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(tr.Root, strconv.Itoa(pid))); err != nil {
		tr.t.Fatal(err)
	}
}

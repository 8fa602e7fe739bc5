package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// What vramscope prints does not depend on how many cores it runs on: the
// decode (split in parts), the replay's forward pass and the loading of
// several inputs at once all give what one core gives. Every snapshot
// fixture is read by analyze --json, explain, stats and export with
// GOMAXPROCS 1 and 4, and the scenario folders are analyzed whole.
func TestSameOutputOnAnyCores(t *testing.T) {
	fromRepoRoot(t)
	files, _ := filepath.Glob("snapshot/testdata/format/*.pickle")
	filepath.WalkDir("testdata/scenarios/out", func(path string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".pickle.gz") {
			files = append(files, path)
		}
		return err
	})
	if len(files) < 40 {
		t.Fatalf("found %d fixtures, want the 40+ in the repository", len(files))
	}
	dir := t.TempDir()
	var lines [][]string
	for _, f := range files {
		lines = append(lines,
			[]string{"analyze", "--json", f},
			[]string{"explain", f},
			[]string{"stats", f},
			[]string{"export", f, "--pprof", filepath.Join(dir, "p.pb.gz"), "--perfetto", filepath.Join(dir, "p.json")})
	}
	lines = append(lines, []string{"analyze", "--json", "testdata/scenarios/out"}, []string{"analyze", "testdata/scenarios/out"})
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, args := range lines {
		var outs [2]string
		for k, procs := range []int{1, 4} {
			runtime.GOMAXPROCS(procs)
			code, stdout, stderr := runCmd(args...)
			outs[k] = strings.Join([]string{stdout, stderr, string(rune('0' + code)), exported(t, dir, args)}, "\x00")
		}
		if outs[0] != outs[1] {
			t.Errorf("vramscope %s: the output on 4 cores differs from that on 1", strings.Join(args, " "))
		}
	}
}

// exported is what export wrote for args, or nothing for other commands.
func exported(t *testing.T, dir string, args []string) string {
	if args[0] != "export" {
		return ""
	}
	var s strings.Builder
	for _, name := range []string{"p.pb.gz", "p.json"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		s.Write(b)
	}
	return s.String()
}

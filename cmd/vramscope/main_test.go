package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// fromRepoRoot runs the rest of the test in the repository root, so that
// commands name fixtures as a user would (snapshot/testdata/format/…), and
// returns this package's testdata directory.
func fromRepoRoot(t *testing.T) string {
	t.Helper()
	golden, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir("../..")
	return golden
}

// runCmd runs the command line in-process.
func runCmd(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = run(context.Background(), &out, &errOut, args)
	return code, out.String(), errOut.String()
}

// checkGolden compares got with testdata/name; -update rewrites it. An
// absent file means empty output. On a mismatch the output is kept in
// name.got for diffing.
func checkGolden(t *testing.T, dir, name, got string) {
	t.Helper()
	path := filepath.Join(dir, name)
	if *update {
		if got == "" {
			if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			return
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if got == string(want) {
		return
	}
	gotPath := path + ".got"
	if err := os.WriteFile(gotPath, []byte(got), 0o644); err != nil {
		t.Fatal(err)
	}
	gotLines, wantLines := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	for i := range max(len(gotLines), len(wantLines)) {
		g, w := "<EOF>", "<EOF>"
		if i < len(gotLines) {
			g = gotLines[i]
		}
		if i < len(wantLines) {
			w = wantLines[i]
		}
		if g != w {
			t.Errorf("%s differs at line %d (diff -u %s %s; go test -update to accept):\n got %s\nwant %s",
				name, i+1, path, gotPath, g, w)
			return
		}
	}
}

// TestStatsGolden runs stats on the format fixtures, in text for each one
// and in JSON for the whole directory (which also skips its README).
func TestStatsGolden(t *testing.T) {
	golden := fromRepoRoot(t)
	fixtures, err := filepath.Glob("snapshot/testdata/format/*.pickle")
	if err != nil || len(fixtures) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	type goldenCase struct {
		name string // testdata/NAME.txt or .json, and NAME.stderr
		args []string
	}
	var cases []goldenCase
	for _, f := range fixtures {
		name := strings.TrimSuffix(filepath.Base(f), ".pickle")
		cases = append(cases, goldenCase{"stats-" + name, []string{"stats", f}})
	}
	cases = append(cases, goldenCase{"stats-json-format-dir", []string{"stats", "--json", "snapshot/testdata/format"}})

	for _, c := range cases {
		code, stdout, stderr := runCmd(c.args...)
		if code != exitOK {
			t.Errorf("%s: exit %d, want 0; stderr:\n%s", c.name, code, stderr)
		}
		ext := ".txt"
		if strings.Contains(c.name, "json") {
			ext = ".json"
		}
		checkGolden(t, golden, c.name+ext, stdout)
		checkGolden(t, golden, c.name+".stderr", stderr)
	}
}

func TestExitCodes(t *testing.T) {
	fromRepoRoot(t)
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := "snapshot/testdata/format/pending.pickle"
	pickle, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	csv := write("memory_log.csv", []byte("timestamp,memory_allocated,memory_reserved\n"))
	truncated := write("truncated.pickle", pickle[:len(pickle)/2])
	empty := write("empty.pickle", nil)
	var tarred bytes.Buffer
	zw := gzip.NewWriter(&tarred)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Name: "step2/actor_rank0.pickle", Mode: 0o644, Size: int64(len(pickle))})
	tw.Write(pickle)
	tw.Close()
	zw.Close()
	targz := write("dumps.tar.gz", tarred.Bytes())
	xz := write("snapshot.pickle.xz", []byte("\xfd7zXZ\x00\x00\x04\xe6\xd6\xb4F")) // the start of xz 5.4.1's output
	logs := filepath.Join(dir, "logs")
	if err := os.Mkdir(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	write("logs/train.log", []byte("step 1 loss 0.3\n"))

	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string // a substring; "" means empty
		wantStderr string // a substring
	}{
		{"no file", []string{"stats"}, exitUsage, "", "requires at least 1 arg"},
		{"unknown flag", []string{"stats", "--nope", good}, exitUsage, "", "unknown flag: --nope"},
		{"unknown command", []string{"nope"}, exitUsage, "", `unknown command "nope"`},
		{"missing file", []string{"stats", "nope.pickle"}, exitInputError, "", "nope.pickle: no such file"},
		{"not a snapshot", []string{"stats", csv}, exitInputError, "",
			csv + `: not a PyTorch memory snapshot: no pickle, gzip or zstd header (it starts with "timestamp,memory")`},
		{"truncated", []string{"stats", truncated}, exitInputError, "", truncated + ": decoding snapshot:"},
		{"empty", []string{"stats", empty}, exitInputError, "", empty + ": empty file"},
		{"xz", []string{"stats", xz}, exitInputError, "", "it is xz-compressed, which vramscope does not read: decompress it first (xz -d)"},
		{"tar.gz", []string{"stats", targz}, exitInputError, "", targz + ": a gzip stream of a tar archive, which vramscope does not read: extract it (tar xf) and analyze the folder"},
		{"tar.gz, analyze", []string{"analyze", targz}, exitInputError, "verdict: none", "it is a tar archive, which vramscope does not read: extract it (tar xf)"},
		{"xz, analyze", []string{"analyze", xz}, exitInputError, "verdict: none", "not a snapshot, memory-log CSV, memory_summary dump, OOM message, serving log or pool ledger: it is xz-compressed"},
		{"good and bad: the good one is still reported", []string{"stats", good, csv}, exitInputError,
			"reserved", "1 of 2 inputs could not be read"},
		{"directory without snapshots", []string{"stats", logs}, exitInputError, "", logs + ": no snapshots in this directory (other files: 1)"},
	}
	for _, test := range tests {
		code, stdout, stderr := runCmd(test.args...)
		if code != test.wantCode {
			t.Errorf("%s: exit %d, want %d; stderr:\n%s", test.name, code, test.wantCode, stderr)
		}
		if test.wantStdout == "" && stdout != "" || !strings.Contains(stdout, test.wantStdout) {
			t.Errorf("%s: stdout %q, want it to contain %q", test.name, stdout, test.wantStdout)
		}
		if !strings.Contains(stderr, test.wantStderr) {
			t.Errorf("%s: stderr %q, want it to contain %q", test.name, stderr, test.wantStderr)
		}
	}
}

// Standard input is read as a redirect (a file) and as a pipe, which is
// copied into a temporary file first on more than one core.
func TestStdin(t *testing.T) {
	fromRepoRoot(t)
	const fixture = "snapshot/testdata/format/pending.pickle"
	data, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdin
	defer func() { os.Stdin = saved }()
	for _, tc := range []struct {
		name  string
		stdin func(t *testing.T) *os.File
	}{
		{"redirect", func(t *testing.T) *os.File {
			f, err := os.Open(fixture)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}},
		{"pipe", func(t *testing.T) *os.File { return testutil.Pipe(t, data) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Stdin = tc.stdin(t)
			defer os.Stdin.Close()
			code, stdout, stderr := runCmd("stats", "--json", "-")
			if code != exitOK {
				t.Fatalf("exit %d; stderr:\n%s", code, stderr)
			}
			if !strings.Contains(stdout, `"path": "-"`) || !strings.Contains(stdout, `"reserved_bytes": 44040192`) {
				t.Errorf("stdout lacks the stdin file's report:\n%s", stdout)
			}
		})
	}
}

// TestReadmeExample checks that the output README.md shows under
// "$ go run ./cmd/vramscope stats …" is what that command prints.
func TestReadmeExample(t *testing.T) {
	fromRepoRoot(t)
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	const prompt = "$ go run ./cmd/vramscope "
	_, rest, ok := strings.Cut(string(readme), prompt)
	if !ok {
		t.Fatalf("README.md has no %q example", prompt)
	}
	cmdLine, rest, _ := strings.Cut(rest, "\n")
	shown, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("README.md example has no closing fence")
	}
	code, stdout, stderr := runCmd(strings.Fields(cmdLine)...)
	if code != exitOK {
		t.Fatalf("%s: exit %d; stderr:\n%s", cmdLine, code, stderr)
	}
	if stdout != shown {
		t.Errorf("README.md shows output that %q no longer prints; now:\n%s", cmdLine, stdout)
	}
}

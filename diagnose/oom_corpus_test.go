package diagnose

import (
	"bufio"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/vramscope/vramscope/memlog"
)

// corpus is the folder of real OOM messages copied from public issues, one
// file each, with testdata/oom/cases.tsv giving the cause each thread
// found (or, where it found none, the one its numbers show).
const corpus = "../testdata/oom"

// corpusCase is one row of cases.tsv.
type corpusCase struct {
	file         string
	cause        Cause
	contributing []Cause // nil: not checked
	source       string
}

func readCorpus(t *testing.T, dir string) []corpusCase {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "cases.tsv"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []corpusCase
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		cols := strings.Split(sc.Text(), "\t")
		if n == 1 || len(cols) == 1 && cols[0] == "" {
			continue // header, blank line
		}
		if len(cols) < 4 {
			t.Fatalf("cases.tsv:%d: %d columns, want file, cause, contributing, source, conclusion", n, len(cols))
		}
		c := corpusCase{file: cols[0], cause: Cause(cols[1]), source: cols[3]}
		if cols[2] != "" {
			for _, x := range strings.Split(cols[2], ",") {
				c.contributing = append(c.contributing, Cause(strings.TrimSpace(x)))
			}
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// gpuMessages is the folder of messages raised on purpose by
// testdata/scenarios/oom_messages.py on an H100 (torch 2.11), one process
// per cause: CASE.txt holds the traceback, CASE.json the cause the case
// was built to show.
const gpuMessages = "../testdata/scenarios/out/oom_messages"

// gpuCases reads the causes of the messages in gpuMessages.
func gpuCases(t *testing.T) []corpusCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(gpuMessages, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded messages in %s (%v)", gpuMessages, err)
	}
	var out []corpusCase
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			Expected Cause  `json:"expected_cause"`
			Torch    string `json:"torch_version"`
			Device   string `json:"device_name"`
		}
		if err := json.Unmarshal(data, &c); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		rel, _ := filepath.Rel(corpus, strings.TrimSuffix(path, ".json")+".txt")
		out = append(out, corpusCase{file: rel, cause: c.Expected, source: "torch " + c.Torch + " on " + c.Device})
	}
	return out
}

// TestOOMCorpus parses every message of the corpus and checks the cause
// against the thread's, and the contributing causes where the table names
// them; likewise the messages recorded on the GPU machine, against the
// cause each was made to show.
func TestOOMCorpus(t *testing.T) {
	cases := readCorpus(t, corpus)
	if len(cases) == 0 {
		t.Fatalf("no cases in %s/cases.tsv", corpus)
	}
	cases = append(cases, gpuCases(t)...)
	agree := 0
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(corpus, c.file))
			if err != nil {
				t.Fatal(err)
			}
			msgs, err := memlog.ParseOOMMessages(strings.NewReader(string(data)))
			if err != nil {
				t.Fatalf("%s (%s): %v", c.file, c.source, err)
			}
			for _, m := range msgs[1:] {
				if r := ExplainMessage(m); r.Explanation == "" || r.Cause == "" {
					t.Errorf("message at line %d unexplained", m.Line)
				}
			}
			r := ExplainMessage(msgs[0])
			if c.cause == "" {
				if r.Explanation == "" {
					t.Errorf("unexplained")
				}
				return
			}
			if r.Cause == c.cause {
				agree++
			} else {
				t.Errorf("cause %s, want %s (%s); because %q", r.Cause, c.cause, c.source, r.Because)
			}
			if c.contributing != nil && !slices.Equal(sorted(r.Contributing), sorted(c.contributing)) {
				t.Errorf("contributing %v, want %v (%s); because %q", r.Contributing, c.contributing, c.source, r.Because)
			}
		})
	}
	t.Logf("%d messages, cause agrees in %d", len(cases), agree)
}

func sorted(cs []Cause) []Cause { return slices.Sorted(slices.Values(cs)) }

package diagnose

import (
	"bufio"
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

func readCorpus(t *testing.T) []corpusCase {
	t.Helper()
	f, err := os.Open(filepath.Join(corpus, "cases.tsv"))
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

// TestOOMCorpus parses every message of the corpus and checks the cause
// against the thread's, and the contributing causes where the table names
// them.
func TestOOMCorpus(t *testing.T) {
	cases := readCorpus(t)
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
			r := ExplainMessage(msgs[0])
			ok := r.Cause == c.cause
			if ok {
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

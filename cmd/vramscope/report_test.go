package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReportCommand(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in the HTML, or in stderr when code != 0
	}{
		{"leak", []string{"../../testdata/scenarios/out/leak_closure"}, exitOK, `"verdict":"leak"`},
		{"oom", []string{"../../testdata/scenarios/out/frag_oom/frag_oom.pickle.gz"}, exitOK, `"kind":"oom"`},
		// The page opens on cuda:1, where the OOM is.
		{"three GPUs", []string{"../../testdata/shapes/three_gpus.pickle"}, exitOK, `"focus":{"snapshot":0,"device":1,"state":"oom 1"}`},
		{"empty snapshot", []string{"../../testdata/shapes/empty.pickle"}, exitOK, `"devices":[]`},
		{"missing input", []string{"../../testdata/scenarios/out/leak_closure", "missing.pickle"}, exitInputError, "missing.pickle"},
		{"bad filter", []string{"--focus", "(", "../../testdata/scenarios/out/leak_closure"}, exitUsage, "focus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "r.html")
			var stderr strings.Builder
			code := run(context.Background(), io.Discard, &stderr, append([]string{"report", "-o", out}, tc.args...))
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr.String())
			}
			if code != exitOK {
				if !strings.Contains(stderr.String(), tc.want) {
					t.Errorf("stderr lacks %q:\n%s", tc.want, stderr.String())
				}
				return
			}
			if !strings.Contains(stderr.String(), "vramscope: wrote "+out) {
				t.Errorf("no success line; stderr:\n%s", stderr.String())
			}
			html, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(html), tc.want) {
				t.Errorf("report lacks %q", tc.want)
			}
		})
	}
}

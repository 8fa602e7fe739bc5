package inputs

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// pickleBytes is the start of a protocol-4 pickle of a dict.
var pickleBytes = []byte{0x80, 0x04, 0x95, 0x10, 0, 0, 0, 0, 0, 0, 0, '}', 0x94, '.'}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func zstded(t *testing.T, b []byte) []byte {
	t.Helper()
	zw, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer zw.Close()
	return zw.EncodeAll(b, nil)
}

func TestKindOf(t *testing.T) {
	csv := []byte("timestamp,memory_allocated,memory_reserved\n1,2,3\n")
	pzstd, err := os.ReadFile("../snapshot/testdata/redump/train.pzstd.pickle.zst")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data []byte
		want Kind
	}{
		{"pickle protocol 4", pickleBytes, Snapshot},
		{"pickle protocol 2", []byte{0x80, 0x02, '}', 'q', 0}, Snapshot},
		{"pickle protocol 5", []byte{0x80, 0x05, ']', '.'}, Snapshot},
		{"gzip pickle", gzipped(t, pickleBytes), Snapshot},
		{"zstd pickle", zstded(t, pickleBytes), Snapshot},
		{"csv", csv, Other},
		{"gzip csv", gzipped(t, csv), Other},
		{"zstd csv", zstded(t, csv), Other},
		{"pzstd pickle: a skippable frame first", pzstd, Snapshot},
		// The header `zstd --long=27` wrote for the 288 MB bench file, and
		// nothing more: a 128 MiB window is not reserved to sniff it.
		{"zstd --long=27 header", []byte{0x28, 0xb5, 0x2f, 0xfd, 0x84, 0x88, 0x54, 0x02, 0x31, 0x11, 0x34, 0x97, 0x01, 0x6a, 0x48, 0x01, 0x4d, 0x51}, Snapshot},
		{"truncated gzip", []byte{0x1f, 0x8b, 0x08}, Other},
		{"protocol byte out of range", []byte{0x80, 0x09, '.'}, Other},
		{"empty", nil, Other},
		{"one byte", []byte{0x80}, Other},
	}
	for _, test := range tests {
		got, err := KindOf(bytes.NewReader(test.data))
		if err != nil {
			t.Errorf("%s: %v", test.name, err)
			continue
		}
		if got != test.want {
			t.Errorf("%s: got %v, want %v", test.name, got, test.want)
		}
	}
}

// The first bytes that xz 5.4.1, bzip2 1.0.8, lz4 1.9.4 and zip 3.0 wrote for
// train.pickle name their compression, and a tar header says it is one; a
// text that starts like bzip2's, and the compressions vramscope reads, name
// none.
func TestForeign(t *testing.T) {
	var tarred bytes.Buffer
	tw := tar.NewWriter(&tarred)
	if err := tw.WriteHeader(&tar.Header{Name: "step2/actor_rank0.pickle", Mode: 0o644, Size: 3}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte{0x80, 4, '.'})
	tw.Close()
	for _, tc := range []struct{ head, want string }{
		{tarred.String(), "a tar archive"},
		{"\xfd7zXZ\x00\x00\x04", "xz-compressed"},
		{"BZh91AY&SY", "bzip2-compressed"},
		{"\x04\x22\x4d\x18\x64\x40\xa7\x6e", "lz4-compressed"},
		{"PK\x03\x04\x14\x00\x00\x00", "zip-compressed"},
		{"BZh is not a header", ""},
		{"\x1f\x8b\x08\x00", ""},
		{"\x28\xb5\x2f\xfd", ""},
		{"\x80\x04\x95", ""},
		{"", ""},
	} {
		if got, _ := Foreign([]byte(tc.head)); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.head, got, tc.want)
		}
	}
}

// writeTree creates files under dir; a name ending in / is a directory.
func writeTree(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for name, data := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func paths(dir string, ins []Input) []string {
	out := make([]string, len(ins))
	for i, in := range ins {
		rel, err := filepath.Rel(dir, in.Path)
		if err != nil {
			rel = in.Path
		}
		out[i] = filepath.ToSlash(rel)
	}
	return out
}

func TestExpand(t *testing.T) {
	dir := t.TempDir()
	log := []byte("step 1 loss 0.3\n")
	writeTree(t, dir, map[string][]byte{
		"run/step10/actor_rank0_pid1.pickle":    pickleBytes,
		"run/step2/actor_rank1_pid2.pickle.gz":  gzipped(t, pickleBytes),
		"run/step2/actor_rank0_pid3.pickle.zst": zstded(t, pickleBytes),
		"run/step2/memory_log.csv":              []byte("a,b\n"),
		"run/train.log":                         log,
		"run/.cache/hidden_rank0.pickle":        pickleBytes,
		"ts/20250601-1300/a_rank0_pid1.pickle":  pickleBytes,
		"ts/20250601-1200/a_rank1_pid1.pickle":  pickleBytes,
		"ts/20250601-1200/a_rank0_pid1.pickle":  pickleBytes,
		"notes.txt":                             log,
		"empty/readme.md":                       log,
	})
	at := func(name string) string { return filepath.Join(dir, filepath.FromSlash(name)) }

	tests := []struct {
		name        string
		args        []string
		want        []string
		wantSkipped int
		wantErr     string
	}{
		{name: "directory: steps in numeric order, ranks within a step, other files skipped",
			args:        []string{at("run")},
			want:        []string{"run/step2/actor_rank0_pid3.pickle.zst", "run/step2/actor_rank1_pid2.pickle.gz", "run/step10/actor_rank0_pid1.pickle"},
			wantSkipped: 2},
		{name: "timestamp folders in time order",
			args: []string{at("ts")},
			want: []string{"ts/20250601-1200/a_rank0_pid1.pickle", "ts/20250601-1200/a_rank1_pid1.pickle", "ts/20250601-1300/a_rank0_pid1.pickle"}},
		{name: "explicit files keep argument order and are not sniffed",
			args: []string{at("notes.txt"), at("run/step10/actor_rank0_pid1.pickle")},
			want: []string{"notes.txt", "run/step10/actor_rank0_pid1.pickle"}},
		{name: "glob",
			args:        []string{at("run/step*/*")},
			want:        []string{"run/step2/actor_rank0_pid3.pickle.zst", "run/step2/actor_rank1_pid2.pickle.gz", "run/step10/actor_rank0_pid1.pickle"},
			wantSkipped: 1},
		{name: "a file named twice is read once",
			args: []string{at("run/step10"), at("run/step10/actor_rank0_pid1.pickle")},
			want: []string{"run/step10/actor_rank0_pid1.pickle"}},
		{name: "stdin",
			args: []string{"-", at("run/step10")},
			want: []string{"-", "run/step10/actor_rank0_pid1.pickle"}},
		{name: "stdin twice", args: []string{"-", "-"}, wantErr: "more than once"},
		{name: "missing file", args: []string{at("nope.pickle")}, wantErr: "no such file"},
		{name: "glob without matches", args: []string{at("run/*.zip")}, wantErr: "no files match"},
		{name: "glob without snapshots", args: []string{at("run/*.log")}, wantErr: "no snapshots among the matching files (1)"},
		{name: "directory without snapshots", args: []string{at("empty")}, wantErr: "no snapshots in this directory"},
	}
	for _, test := range tests {
		got, skipped, err := Expand(test.args)
		if test.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), test.wantErr) {
				t.Errorf("%s: got error %v, want one containing %q", test.name, err, test.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", test.name, err)
			continue
		}
		if p := paths(dir, got); !slices.Equal(p, test.want) {
			t.Errorf("%s:\n got %q\nwant %q", test.name, p, test.want)
		}
		if len(skipped) != test.wantSkipped {
			t.Errorf("%s: skipped %q, want %d files", test.name, skipped, test.wantSkipped)
		}
	}
}

func TestOpenCountsBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.pickle")
	if err := os.WriteFile(path, pickleBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Input{Path: path}.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Size() != int64(len(pickleBytes)) {
		t.Errorf("Size = %d, want %d", r.Size(), len(pickleBytes))
	}
	if _, err := io.CopyN(io.Discard, r, 5); err != nil {
		t.Fatal(err)
	}
	if r.BytesRead() != 5 {
		t.Errorf("BytesRead after 5 bytes = %d", r.BytesRead())
	}
}

func TestExpandWithLogs(t *testing.T) {
	dir := t.TempDir()
	csv := []byte("timestamp,memory_allocated,memory_reserved\n1,2,3\n")
	oom := []byte("step 9\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.00 GiB is free.\n")
	summary := []byte("|                  PyTorch CUDA memory summary, device ID 0                 |\n")
	writeTree(t, dir, map[string][]byte{
		"run/step2/actor_rank0_pid1.pickle":      pickleBytes,
		"run/actor_rank0_pid1_memory_log.csv":    csv,
		"run/oom.txt":                            oom,
		"run/summary.txt":                        summary,
		"run/train.log":                          []byte("step 1 loss 0.3\n"),
		"run/model.pt":                           append([]byte("PK\x03\x04\x00"), csv...),
		"logs/rollout_rank1_pid2_memory_log.csv": csv,
		"empty/readme.md":                        []byte("# notes\n"),
	})
	at := func(name string) string { return filepath.Join(dir, filepath.FromSlash(name)) }
	tests := []struct {
		name        string
		args        []string
		want        []string // path=kind
		wantSkipped int
		wantErr     string
	}{
		{name: "directory: snapshots, logs and text dumps; binary and foreign files skipped",
			args: []string{at("run")},
			want: []string{"run/step2/actor_rank0_pid1.pickle=snapshot", "run/actor_rank0_pid1_memory_log.csv=memory log",
				"run/oom.txt=text", "run/summary.txt=text"},
			wantSkipped: 2},
		{name: "directory of logs only",
			args: []string{at("logs")},
			want: []string{"logs/rollout_rank1_pid2_memory_log.csv=memory log"}},
		{name: "glob of logs",
			args: []string{at("run/*.txt")},
			want: []string{"run/oom.txt=text", "run/summary.txt=text"}},
		{name: "explicit files are kept and classified",
			args: []string{at("run/train.log"), at("logs/rollout_rank1_pid2_memory_log.csv")},
			want: []string{"run/train.log=other", "logs/rollout_rank1_pid2_memory_log.csv=memory log"}},
		{name: "directory with none of the three", args: []string{at("empty")},
			wantErr: "no snapshots, memory logs or memory_summary/OOM text in this directory (other files: 1)"},
	}
	for _, test := range tests {
		got, skipped, err := ExpandWithLogs(test.args)
		if test.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), test.wantErr) {
				t.Errorf("%s: got error %v, want one containing %q", test.name, err, test.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", test.name, err)
			continue
		}
		p := paths(dir, got)
		for i, in := range got {
			p[i] += "=" + in.Kind.String()
		}
		if !slices.Equal(p, test.want) {
			t.Errorf("%s:\n got %q\nwant %q", test.name, p, test.want)
		}
		if len(skipped) != test.wantSkipped {
			t.Errorf("%s: skipped %q, want %d files", test.name, skipped, test.wantSkipped)
		}
	}
	// Expand still keeps only snapshots from a directory.
	if _, _, err := Expand([]string{at("logs")}); err == nil || !strings.Contains(err.Error(), "no snapshots in this directory") {
		t.Errorf("Expand of a log-only directory: error %v", err)
	}
}

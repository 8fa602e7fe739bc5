package diff

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
)

// TorchVersion is the torch version that wrote the snapshot at path, where
// a file beside it says so: the sidecar PATH.json (NAME.pickle.json for
// NAME.pickle.gz) with a "torch_version" key, as the repository's
// scenario scripts write, or the capture hook's dump notes
// (OUT/.vramscope/dumps-PID.jsonl, one line per dump). Snapshots themselves
// do not record it; "" when nothing does.
func TorchVersion(path string) string {
	base := path
	for _, ext := range []string{".gz", ".zst", ".zstd"} {
		base = strings.TrimSuffix(base, ext)
	}
	if v := sidecarVersion(base + ".json"); v != "" {
		return v
	}
	return hookNoteVersion(path)
}

// sidecarVersion reads "torch_version" from a JSON file, "" if none.
func sidecarVersion(file string) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	var side struct {
		TorchVersion string `json:"torch_version"`
	}
	if json.Unmarshal(data, &side) != nil {
		return ""
	}
	return side.TorchVersion
}

// hookNoteVersion looks for the dump of path in the hook's notes, in the
// folders above it up to the output folder that holds .vramscope/.
func hookNoteVersion(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return ""
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		notes, _ := filepath.Glob(filepath.Join(dir, ".vramscope", "dumps-*.jsonl"))
		for _, n := range notes {
			if v := noteVersion(n, dir, abs); v != "" {
				return v
			}
		}
		if len(notes) > 0 || filepath.Dir(dir) == dir {
			return ""
		}
	}
}

// noteVersion is the torch_version of the note in file about the dump at
// abs, whose paths are relative to out. The note names the .pickle; the
// file may have been compressed since.
func noteVersion(file, out, abs string) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var note struct {
			Path         string `json:"path"`
			TorchVersion string `json:"torch_version"`
		}
		if json.Unmarshal(sc.Bytes(), &note) != nil || note.Path == "" {
			continue
		}
		if p := filepath.Join(out, note.Path); abs == p || strings.HasPrefix(abs, p+".") {
			return note.TorchVersion
		}
	}
	return ""
}

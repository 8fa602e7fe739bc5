package capture

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

// Kind is what a file the hook wrote holds.
type Kind string

const (
	KindSnapshot   Kind = "snapshot"
	KindMemoryLog  Kind = "memory log"
	KindOOMMessage Kind = "OOM message"
)

// File is one file the hook wrote.
type File struct {
	// Rel is the path below the output folder, with forward slashes.
	Rel  string
	Kind Kind
	Size int64
}

// Collect lists the snapshots, memory logs and OOM messages under out, in
// path order. The hook's sidecars (.json), its temporary files and its
// .vramscope folder (hidden) are left out.
func Collect(out string) ([]File, error) {
	var files []File
	err := filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != out && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		kind, ok := kindOf(d.Name())
		if !ok {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(out, path)
		if err != nil {
			return err
		}
		files = append(files, File{Rel: filepath.ToSlash(rel), Kind: kind, Size: info.Size()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", out, err)
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Rel, b.Rel) })
	return files, nil
}

// kindOf tells a file's kind by the names the hook gives them.
func kindOf(name string) (Kind, bool) {
	switch {
	case strings.HasSuffix(name, ".pickle"), strings.HasSuffix(name, ".pickle.gz"), strings.HasSuffix(name, ".pickle.zst"):
		// The hook writes .pickle; compressed copies of its folders are read too.
		return KindSnapshot, true
	case strings.HasSuffix(name, "_memory_log.csv"):
		return KindMemoryLog, true
	case strings.HasSuffix(name, "_oom.txt"):
		return KindOOMMessage, true
	}
	return "", false
}

package callsite

import (
	"bufio"
	"os"
	"strings"
	"sync"
)

// maxQuote is the longest source line quoted; longer ones are cut.
const maxQuote = 120

// Source quotes lines of Python files that exist on this machine: a finding
// recorded elsewhere names paths that usually do not, so a quote is an
// extra, never needed. It is safe for concurrent use and reads each file
// once.
type Source struct {
	mu    sync.Mutex
	files map[string][]string // nil: unreadable
}

// Line returns the text of line n (1-based) of file, trimmed, and whether
// the file could be read and has that line.
func (s *Source) Line(file string, n uint64) (string, bool) {
	if file == "" || n == 0 {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	lines, seen := s.files[file]
	if !seen {
		lines = readLines(file)
		if s.files == nil {
			s.files = map[string][]string{}
		}
		s.files[file] = lines
	}
	if n > uint64(len(lines)) {
		return "", false
	}
	text := strings.TrimSpace(lines[n-1])
	if len(text) > maxQuote {
		text = text[:maxQuote] + "…"
	}
	return text, text != ""
}

// readLines reads a regular file's lines, or returns nil.
func readLines(file string) []string {
	if fi, err := os.Stat(file); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	fh, err := os.Open(file)
	if err != nil {
		return nil
	}
	defer fh.Close()
	var lines []string
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if sc.Err() != nil {
		return nil
	}
	return lines
}

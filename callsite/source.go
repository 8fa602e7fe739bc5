package callsite

import (
	"bufio"
	"os"
	"regexp"
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
	lines := s.lines(file)
	if n > uint64(len(lines)) {
		return "", false
	}
	text := strings.TrimSpace(lines[n-1])
	if len(text) > maxQuote {
		text = text[:maxQuote] + "…"
	}
	return text, text != ""
}

// lines returns file's lines, read once (nil: unreadable).
func (s *Source) lines(file string) []string {
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
	return lines
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

// classLine matches a class statement; defLine a def.
var (
	classLine = regexp.MustCompile(`^(\s*)class\s+([A-Za-z_]\w*)`)
	defLine   = regexp.MustCompile(`^(\s*)(?:async\s+)?def\s`)
)

// Class returns the class whose method holds line n of file (the
// enclosing def's enclosing class), and whether the file could be read
// and has one: a module's forward frame names its file and line, never its
// class.
func (s *Source) Class(file string, n uint64) (string, bool) {
	if file == "" || n == 0 {
		return "", false
	}
	lines := s.lines(file)
	if n > uint64(len(lines)) {
		return "", false
	}
	def := -1 // indentation of the enclosing def, once found
	for i := int(n) - 1; i >= 0; i-- {
		if def < 0 {
			if m := defLine.FindStringSubmatch(lines[i]); m != nil {
				def = len(m[1])
			}
			continue
		}
		if m := classLine.FindStringSubmatch(lines[i]); m != nil && len(m[1]) < def {
			return m[2], true
		}
	}
	return "", false
}

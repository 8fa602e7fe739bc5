package pools

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
)

// markers are the substrings of every line Parse reads; a line with none
// is skipped unread, which keeps a day of logs to a few seconds.
var markers = [][]byte{decodeKey, prefillKey, vllmUsageKey, kvLeakKey, slotLeakKey}

// Detect reports whether data holds a serving engine's pool stats or
// idle-check errors: a line with a marker that reads as a record (with up
// to maxJoin more lines, for a wrapped paste). The marker alone is not
// enough: the simulator that writes these logs holds every one.
func Detect(data []byte) bool {
	for _, m := range markers {
		rest := data
		for range maxDetect {
			i := bytes.Index(rest, m)
			if i < 0 {
				break
			}
			start := bytes.LastIndexByte(rest[:i], '\n') + 1
			end := i
			for range maxJoin + 1 {
				if j := bytes.IndexByte(rest[end:], '\n'); j >= 0 {
					end += j + 1
				} else {
					end = len(rest)
				}
			}
			p := parser{log: &Log{}}
			if _, ok := p.record(bytes.ReplaceAll(rest[start:end], []byte("\n"), nil)); ok {
				return true
			}
			rest = rest[i+len(m):]
		}
	}
	return false
}

// maxDetect is how many lines with a marker Detect tries per marker.
const maxDetect = 20

// maxLine bounds one line: records pasted without newlines run long.
const maxLine = 16 << 20

// maxJoin is how many continuation lines one record may take: pastes
// hard-wrapped at 80 columns split a stats line in three.
const maxJoin = 3

// Parse reads a serving log. Lines it cannot read are counted in
// Log.Unparsed; only a read error fails.
func Parse(r io.Reader) (*Log, error) {
	p := parser{log: &Log{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	for sc.Scan() {
		p.log.Lines++
		p.line(sc.Bytes())
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("serving log, line %d: %w", p.log.Lines+1, err)
	}
	p.flush()
	p.finish()
	return p.log, nil
}

// parser holds the record being read: a candidate line waits for the next
// line, which may continue it (a wrapped paste, an idle check's extra
// lines).
type parser struct {
	log   *Log
	clock clock
	// last is the latest time read, for lines without one (a traceback).
	last     float64
	lastRank string

	pend     []byte
	pendLine int
	pendRec  any
	pendOK   bool
	joins    int
	st       stamp
	hasSt    bool
	stRaw    []byte // the prefix p.st was read from
}

func (p *parser) line(raw []byte) {
	line, outer, hasOuter := containerPrefix(bytes.TrimRight(raw, " \r"))
	if p.pend != nil && p.joins < maxJoin && continues(line) {
		joined := append(slices.Clip(p.pend), line...)
		if rec, ok := p.record(joined); ok || !p.pendOK {
			p.pend, p.pendRec, p.pendOK = joined, rec, ok
			p.joins++
			return
		}
	}
	p.flush()
	if !slices.ContainsFunc(markers, func(m []byte) bool { return bytes.Contains(line, m) }) {
		p.capacity(line)
		return
	}
	p.stamp(line)
	if !p.hasSt && hasOuter {
		p.st, p.hasSt = outer, true
	}
	p.pend, p.pendLine, p.joins = slices.Clone(line), p.log.Lines, 0
	p.pendRec, p.pendOK = p.record(p.pend)
}

// stamp reads the line's time stamp, reusing the last one when the line
// starts the same up to its first ']' (SGLang's whole prefix, vLLM's
// level, time and file): a busy log prints many lines a second.
func (p *parser) stamp(line []byte) {
	n := bytes.IndexByte(line, ']') + 1
	if n == 0 || n > maxStampPrefix || !p.hasSt || !bytes.Equal(line[:n], p.stRaw) {
		p.st, p.hasSt = parseStamp(line)
		p.stRaw = append(p.stRaw[:0], line[:max(n, 0)]...)
		return
	}
	if p.st.layout == vllmLayout {
		p.st.rank = vllmRank(line) // the engine index follows the ']'
	}
}

// maxStampPrefix bounds the prefix the stamp cache compares.
const maxStampPrefix = 128

// continues reports whether line carries on the record before it rather
// than starting one: it has no prefix any engine or logger writes.
func continues(line []byte) bool {
	if len(line) == 0 {
		return false
	}
	switch line[0] {
	case '[', '(', ' ', '\t':
		return false
	}
	for _, p := range []string{"INFO", "WARNING", "ERROR", "DEBUG", "Traceback", "ValueError", "AssertionError"} {
		if bytes.HasPrefix(line, []byte(p)) {
			return false
		}
	}
	_, _, dated := containerPrefix(line)
	if len(line) >= 5 && line[4] == '-' && line[0] >= '0' && line[0] <= '9' {
		return false
	}
	return !dated
}

// record reads text as whichever record its marker names.
func (p *parser) record(text []byte) (any, bool) {
	switch {
	case bytes.Contains(text, kvLeakKey) || bytes.Contains(text, slotLeakKey):
		return parseIdleCheck(text)
	case bytes.Contains(text, vllmUsageKey):
		return parseVLLMStats(text)
	default:
		return parseSGLangStats(text)
	}
}

// flush commits the pending record.
func (p *parser) flush() {
	if p.pend == nil {
		return
	}
	text, line := p.pend, p.pendLine
	p.pend = nil
	p.capacity(text)
	rec, ok := p.pendRec, p.pendOK
	if !ok {
		p.log.Unparsed++
		if p.log.FirstUnparsed == "" {
			p.log.FirstUnparsed = fmt.Sprintf("line %d: %.160s", line, text)
		}
		return
	}
	at := float64(line)
	rank := p.lastRank
	if p.hasSt {
		at = p.clock.seconds(p.st)
		if !p.log.HasTime {
			p.log.HasTime, p.log.Start, p.log.Layout = true, p.clock.start, p.st.layout
		}
		rank = p.st.rank
	} else if p.log.HasTime {
		at = p.last
	}
	p.last, p.lastRank = at, rank
	switch r := rec.(type) {
	case Sample:
		r.At, r.Rank, r.Line = at, rank, line
		if p.log.Engine == "" {
			p.log.Engine = SGLang
			if bytes.Contains(text, vllmUsageKey) {
				p.log.Engine = VLLM
			}
		}
		p.log.Samples = append(p.log.Samples, r)
	case IdleCheck:
		r.At, r.Line = at, line
		p.log.Engine = SGLang
		// Every rank prints the same message: keep one.
		if n := len(p.log.Idle); n == 0 || p.log.Idle[n-1].Pool != r.Pool || p.log.Idle[n-1].Leaked != r.Leaked {
			p.log.Idle = append(p.log.Idle, r)
		}
		if r.Pool == "token_to_kv_pool" && p.log.Capacity == 0 {
			p.log.Capacity = r.Capacity
		}
	}
}

// capacity takes the pool size from a startup line.
func (p *parser) capacity(line []byte) {
	if p.log.Capacity != 0 {
		return
	}
	for _, key := range [][]byte{maxTotalKey, kvAllocKey, vllmSizeKey} {
		i := bytes.Index(line, key)
		if i < 0 {
			continue
		}
		rest := bytes.TrimLeft(line[i+len(key):], " ")
		end := 0
		for end < len(rest) && (rest[end] >= '0' && rest[end] <= '9' || rest[end] == ',') {
			end++
		}
		if n, err := strconv.ParseInt(string(bytes.ReplaceAll(rest[:end], []byte(","), nil)), 10, 64); err == nil && n > 0 {
			p.log.Capacity = n
			return
		}
	}
}

// finish turns printed shares into tokens. A SGLang log without its
// startup line still gives the size: #token / token usage on a busy line.
func (p *parser) finish() {
	l := p.log
	if l.Capacity == 0 && l.Engine == SGLang {
		var best Sample
		for _, s := range l.Samples {
			if s.Exact && s.Share > best.Share {
				best = s
			}
		}
		if best.Share >= 0.1 {
			l.Capacity = int64(math.Round(float64(best.Used) / best.Share))
		}
	}
	if l.Capacity == 0 && slices.ContainsFunc(l.Samples, func(s Sample) bool { return s.Exact }) {
		// Counts and shares of an unknown size do not mix: keep the counts.
		l.Samples = slices.DeleteFunc(l.Samples, func(s Sample) bool { return !s.Exact })
	}
	size := float64(l.poolSize())
	for i := range l.Samples {
		if s := &l.Samples[i]; !s.Exact {
			s.Used = int64(math.Round(s.Share * size))
		}
	}
}

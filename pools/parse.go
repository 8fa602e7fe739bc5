package pools

import (
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
			var p parser
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

// maxJoin is how many continuation lines one record may take: pastes
// hard-wrapped at 80 columns split a stats line in three.
const maxJoin = 3

// Parse reads a serving log. Lines it cannot read are counted in
// Log.Unparsed; only a read error fails. The log is read in chunks that
// end where a record does (chunks.go), parsed on every core and merged in
// order: a day of logs from a busy server is hundreds of megabytes.
func Parse(r io.Reader) (*Log, error) {
	return parse(r, chunkSize)
}

// parse is Parse in chunks of about chunk bytes.
func parse(r io.Reader, chunk int) (*Log, error) {
	m := merger{log: &Log{}, series: map[string]int{}}
	if err := eachChunk(r, chunk, parseChunk, m.add); err != nil {
		return nil, fmt.Errorf("serving log, line %d: %w", m.log.Lines+1, err)
	}
	m.log.finish()
	return m.log, nil
}

// parseChunk reads whole lines; numbers in its part count from the
// chunk's first line.
func parseChunk(data []byte) part {
	// Most lines of a busy log are records: room for one a line saves
	// growing the slice.
	p := parser{out: part{recs: make([]rec, 0, len(data)/avgLine)}}
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		p.out.lines++
		p.line(line)
	}
	p.flush()
	return p.out
}

// avgLine is about the length of a stats line.
const avgLine = 160

// part is what one chunk holds, in order.
type part struct {
	recs              []rec
	lines, unparsed   int
	firstUnparsed     string
	firstUnparsedLine int
}

// rec is one record as a chunk reads it: its time and rank are settled
// when the chunks are merged (a line without a time stamp takes the
// previous record's, and a stamp without a date counts days from the
// ones before).
type rec struct {
	sample Sample
	idle   *IdleCheck
	// capacity is the pool size a startup line gives; the rest of rec
	// is unset then.
	capacity int64
	line     int
	st       stamp
	hasSt    bool
	vllm     bool
}

// parser reads one chunk. A candidate line waits for the next line, which
// may continue it (a wrapped paste, an idle check's extra lines).
type parser struct {
	out part
	// capacity is set once a startup line gave the pool size.
	capacity bool

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
		p.capacityOf(line)
		return
	}
	p.stamp(line)
	if !p.hasSt && hasOuter {
		p.st, p.hasSt = outer, true
	}
	// The chunk stays put while it is parsed: a record that is not joined
	// needs no copy.
	p.pend, p.pendLine, p.joins = line, p.out.lines, 0
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

// flush ends the pending record.
func (p *parser) flush() {
	if p.pend == nil {
		return
	}
	text, line := p.pend, p.pendLine
	p.pend = nil
	if _, stats := p.pendRec.(Sample); !stats || !p.pendOK {
		p.capacityOf(text) // an idle check prints max_total_num_tokens
	}
	if !p.pendOK {
		p.out.unparsed++
		if p.out.firstUnparsed == "" {
			p.out.firstUnparsed, p.out.firstUnparsedLine = fmt.Sprintf("%.160s", text), line
		}
		return
	}
	r := rec{line: line, st: p.st, hasSt: p.hasSt}
	switch x := p.pendRec.(type) {
	case Sample:
		r.sample, r.vllm = x, bytes.Contains(text, vllmUsageKey)
	case IdleCheck:
		r.idle = &x
	}
	p.out.recs = append(p.out.recs, r)
}

// capacityOf takes the pool size from a startup line.
func (p *parser) capacityOf(line []byte) {
	if p.capacity {
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
			p.capacity = true
			p.out.recs = append(p.out.recs, rec{capacity: n})
			return
		}
	}
}

// merger puts the chunks' records together in order.
type merger struct {
	log   *Log
	clock clock
	// last is the latest time read, for records without one (a traceback).
	last     float64
	lastRank string
	// series indexes Log.Series by rank.
	series map[string]int
}

func (m *merger) add(p part) {
	l := m.log
	if p.unparsed > 0 && l.FirstUnparsed == "" {
		l.FirstUnparsed = fmt.Sprintf("line %d: %s", l.Lines+p.firstUnparsedLine, p.firstUnparsed)
	}
	for _, r := range p.recs {
		m.commit(r, l.Lines)
	}
	l.Lines += p.lines
	l.Unparsed += p.unparsed
}

// commit adds one record whose line numbers count from offset+1.
func (m *merger) commit(r rec, offset int) {
	l := m.log
	if r.capacity > 0 {
		if l.Capacity == 0 {
			l.Capacity = r.capacity
		}
		return
	}
	line := offset + r.line
	at := float64(line)
	rank := m.lastRank
	if r.hasSt {
		at = m.clock.seconds(r.st)
		if !l.HasTime {
			l.HasTime, l.Start, l.Layout = true, m.clock.start, r.st.layout
		}
		rank = r.st.rank
	} else if l.HasTime {
		at = m.last
	}
	m.last, m.lastRank = at, rank
	if c := r.idle; c != nil {
		c.At, c.Line = at, line
		l.Engine = SGLang
		// Every rank prints the same message: keep one.
		if n := len(l.Idle); n == 0 || l.Idle[n-1].Pool != c.Pool || l.Idle[n-1].Leaked != c.Leaked {
			l.Idle = append(l.Idle, *c)
		}
		if c.Pool == "token_to_kv_pool" && l.Capacity == 0 {
			l.Capacity = c.Capacity
		}
		return
	}
	s := r.sample
	s.At, s.Line = at, line
	if l.Engine == "" {
		l.Engine = SGLang
		if r.vllm {
			l.Engine = VLLM
		}
	}
	i, ok := m.series[rank]
	if !ok {
		i = len(l.Series)
		m.series[rank] = i
		l.Series = append(l.Series, Series{Rank: rank})
	}
	sr := &l.Series[i]
	if len(sr.Samples) == cap(sr.Samples) {
		// Half again as much: append's quarter makes a day of logs copy
		// its samples five times over, doubling would leave up to half
		// of the largest array unused.
		sr.Samples = slices.Grow(sr.Samples, max(len(sr.Samples)/2, 256))
	}
	sr.Samples = append(sr.Samples, s)
}

// finish turns printed shares into tokens. A SGLang log without its
// startup line still gives the size: #token / token usage on a busy line.
func (l *Log) finish() {
	exact := false
	for _, sr := range l.Series {
		exact = exact || slices.ContainsFunc(sr.Samples, func(s Sample) bool { return s.Exact })
	}
	if l.Capacity == 0 && l.Engine == SGLang {
		var best Sample
		for _, sr := range l.Series {
			for _, s := range sr.Samples {
				if s.Exact && s.Share > best.Share {
					best = s
				}
			}
		}
		if best.Share >= 0.1 {
			l.Capacity = int64(math.Round(float64(best.Used) / float64(best.Share)))
		}
	}
	size := float64(l.poolSize())
	for i := range l.Series {
		sr := &l.Series[i]
		if l.Capacity == 0 && exact {
			// Counts and shares of an unknown size do not mix: keep the
			// counts.
			sr.Samples = slices.DeleteFunc(sr.Samples, func(s Sample) bool { return !s.Exact })
		}
		for j := range sr.Samples {
			if s := &sr.Samples[j]; !s.Exact {
				s.Used = int64(math.Round(float64(s.Share) * size))
			}
		}
	}
	l.Series = slices.DeleteFunc(l.Series, func(sr Series) bool { return len(sr.Samples) == 0 })
}

package pools

import "slices"

// Stream reads a log as it is written (watch --follow): Write takes the
// bytes as they come, Log judges what has come so far. It holds the
// partial last line, and the last whole line until the next one shows
// whether it carries on a wrapped record; Log takes that line as it is.
type Stream struct {
	m   merger
	buf []byte
}

// NewStream starts an empty log.
func NewStream() *Stream {
	return &Stream{m: merger{log: &Log{}, series: map[string]int{}}}
}

// Write adds p to the log; it never fails.
func (s *Stream) Write(p []byte) (int, error) {
	s.buf = append(s.buf, p...)
	if cut := splitPoint(s.buf); cut > 0 {
		s.commit(cut)
	} else if lastLineEnd(s.buf) == 0 && len(s.buf) > maxLine {
		// No line is that long: binary or a log gone wrong. Count it
		// and go on, as a parse of the whole file would stop.
		s.m.log.Lines++
		s.m.log.Unparsed++
		s.buf = s.buf[:0]
	}
	return len(p), nil
}

// commit parses the first n bytes of the buffer, whole lines.
func (s *Stream) commit(n int) {
	s.m.add(parseChunk(s.buf[:n]))
	s.buf = s.buf[:copy(s.buf, s.buf[n:])]
}

// Log returns a copy of the log read so far, shares turned into tokens as
// Parse does at the end.
func (s *Stream) Log() *Log {
	if i := lastLineEnd(s.buf); i > 0 {
		s.commit(i)
	}
	l := *s.m.log
	l.Series = slices.Clone(l.Series)
	for i := range l.Series {
		l.Series[i].Samples = slices.Clone(l.Series[i].Samples)
	}
	l.Idle = slices.Clone(l.Idle)
	l.finish()
	return &l
}

// lastLineEnd is the length of buf's whole lines.
func lastLineEnd(buf []byte) int {
	for i := len(buf) - 1; i >= 0; i-- {
		if buf[i] == '\n' {
			return i + 1
		}
	}
	return 0
}

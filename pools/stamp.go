package pools

import (
	"bytes"
	"time"
)

// stamp is a line's time stamp and the rank its prefix names.
type stamp struct {
	t time.Time
	// dated is false for stamps without a date (SGLang's "[HH:MM:SS]"),
	// whose day is counted by the reader when the clock goes back.
	dated bool
	rank  string
	// layout formats a time the way this stamp printed it.
	layout string
}

// containerPrefix strips the RFC 3339 time that `docker logs -t` and
// `kubectl logs --timestamps` put before each line
// ("2025-10-15T00:00:48.753199366Z "), returning it as a fallback stamp.
func containerPrefix(line []byte) ([]byte, stamp, bool) {
	if len(line) < 21 || line[4] != '-' || line[10] != 'T' {
		return line, stamp{}, false
	}
	sp := bytes.IndexByte(line, ' ')
	if sp < 0 {
		return line, stamp{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(line[:sp]))
	if err != nil {
		return line, stamp{}, false
	}
	return line[sp+1:], stamp{t: t, dated: true, layout: time.RFC3339}, true
}

// parseStamp reads the engines' own prefixes:
//
//	[2025-08-11 17:17:03 DP1 TP0] …   SGLang (scheduler logger, 0.4-0.5)
//	[17:17:03 TP0] …                  SGLang before 0.4
//	2025-08-11 17:17:03,123 [INFO] …  SGLang through Python logging
//	INFO 01-30 03:19:14 [loggers.py:118] Engine 000: …   vLLM (any "(APIServer pid=N) " before)
func parseStamp(line []byte) (stamp, bool) {
	if len(line) > 0 && line[0] == '[' {
		end := bytes.IndexByte(line, ']')
		if end < 0 {
			return stamp{}, false
		}
		f := bytes.Fields(line[1:end])
		if len(f) == 0 {
			return stamp{}, false
		}
		var s stamp
		rest := f
		if t, err := time.Parse("2006-01-02 15:04:05", string(f[0])+" "+string(at(f, 1))); err == nil {
			s, rest = stamp{t: t, dated: true, layout: time.DateTime}, f[2:]
		} else if t, err := time.Parse("15:04:05", string(f[0])); err == nil {
			s, rest = stamp{t: t, layout: "15:04:05 (day 2)"}, f[1:]
		} else {
			return stamp{}, false
		}
		s.rank = string(bytes.Join(rest, []byte(" ")))
		return s, true
	}
	if len(line) >= 19 && line[4] == '-' && line[10] == ' ' {
		if t, err := time.Parse("2006-01-02 15:04:05", string(line[:19])); err == nil {
			return stamp{t: t, dated: true, layout: time.DateTime}, true
		}
	}
	// vLLM: LEVEL MM-DD HH:MM:SS, the level after an optional process prefix.
	for _, lvl := range [][]byte{[]byte("INFO "), []byte("WARNING "), []byte("ERROR "), []byte("DEBUG ")} {
		i := bytes.Index(line, lvl)
		if i < 0 || i > 40 {
			continue
		}
		rest := line[i+len(lvl):]
		if len(rest) < 14 {
			return stamp{}, false
		}
		t, err := time.Parse("01-02 15:04:05", string(rest[:14]))
		if err != nil {
			return stamp{}, false
		}
		// No year printed: any fixed one orders the log.
		return stamp{t: t.AddDate(2000, 0, 0), dated: true, layout: vllmLayout, rank: vllmRank(line)}, true
	}
	return stamp{}, false
}

// vllmLayout is vLLM's time stamp, which has no year.
const vllmLayout = "01-02 15:04:05"

// vllmRank is the "Engine 000" a vLLM V1 line names (the DP engine), or "".
func vllmRank(line []byte) string {
	if j := bytes.Index(line, []byte("Engine ")); j >= 0 && j+10 <= len(line) {
		return string(line[j : j+10])
	}
	return ""
}

func at(f [][]byte, i int) []byte {
	if i < len(f) {
		return f[i]
	}
	return nil
}

// clock turns stamps into seconds from the first one, counting days for
// stamps without a date: a clock that goes back by more than 12 hours has
// passed midnight.
type clock struct {
	start time.Time
	days  time.Duration
	last  time.Time
	set   bool
}

func (c *clock) seconds(s stamp) float64 {
	t := s.t
	if !s.dated {
		t = t.Add(c.days)
		if c.set && t.Before(c.last.Add(-12*time.Hour)) {
			c.days += 24 * time.Hour
			t = t.Add(24 * time.Hour)
		}
	}
	if !c.set {
		c.start, c.set = t, true
	}
	c.last = t
	return t.Sub(c.start).Seconds()
}

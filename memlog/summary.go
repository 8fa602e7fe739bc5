package memlog

import (
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/vramscope/vramscope/internal/units"
)

// MemorySummary is one torch.cuda.memory_summary() table.
//
// The table truncates every size to a whole unit chosen per column from the
// all-pools value, switching units only once that value reaches 768 of the
// next one; so each size is a lower bound, short by less than 1/768 (0.13%)
// of the all-pools value. Counts from 750,000 up are truncated to thousands
// ("3456 K") the same way.
type MemorySummary struct {
	Line         int   // 1-based line of the table's title in the input
	Device       int   // "device ID N"
	OOMs         int64 // "CUDA OOMs": OutOfMemoryErrors raised so far
	AllocRetries int64 // "cudaMalloc retries": cache flushes forced by a failed cudaMalloc

	// Abbreviated reports a table printed with abbreviated=True, which has
	// no "from large pool" / "from small pool" rows: every LargePool and
	// SmallPool below is then zero.
	Abbreviated bool

	Allocated     SizeStat // "Allocated memory": blocks handed to tensors, rounded sizes
	Active        SizeStat // "Active memory": allocated plus blocks awaiting a cross-stream free
	Requested     SizeStat // "Requested memory": the sizes tensors asked for, before rounding
	Reserved      SizeStat // "GPU reserved memory": segments obtained with cudaMalloc
	NonReleasable SizeStat // "Non-releasable memory": free blocks in split segments; empty_cache cannot return them

	Allocations         CountStat // "Allocations"
	ActiveAllocs        CountStat // "Active allocs"
	Segments            CountStat // "GPU reserved segments"
	NonReleasableAllocs CountStat // "Non-releasable allocs"

	// The oversize rows (blocks ≥ max_split_size) have no per-pool lines.
	OversizeAllocations Counts // "Oversize allocations"
	OversizeSegments    Counts // "Oversize GPU segments"

	// Missing names the rows this table lacks (older torch releases print no
	// "Requested memory" or oversize rows); their fields are zero.
	Missing []string
}

// Sizes holds the four columns of one size row.
type Sizes struct {
	Current   units.Bytes // "Cur Usage"
	Peak      units.Bytes // "Peak Usage", since start or reset_peak_memory_stats
	Allocated units.Bytes // "Tot Alloc": cumulative
	Freed     units.Bytes // "Tot Freed": cumulative
}

// SizeStat is a size row with its per-pool rows.
type SizeStat struct {
	All, LargePool, SmallPool Sizes
}

// Counts holds the four columns of one count row.
type Counts struct {
	Current, Peak, Allocated, Freed int64
}

// CountStat is a count row with its per-pool rows.
type CountStat struct {
	All, LargePool, SmallPool Counts
}

var (
	// summaryTitle allows ";" for "," because the SGLang memory-log recipe
	// replaces commas to keep the table inside one CSV field.
	summaryTitle   = regexp.MustCompile(`PyTorch CUDA memory summary[,;] device ID (\d+)`)
	summaryOOMs    = regexp.MustCompile(`CUDA OOMs: *(\d+)`)
	summaryRetries = regexp.MustCompile(`cudaMalloc retries: *(\d+)`)
)

// summaryRows lists the rows of a table in torch's order, with the field each
// fills. A row name torch adds later is skipped rather than rejected.
func summaryRows(s *MemorySummary) []summaryRow {
	return []summaryRow{
		{"Allocated memory", &s.Allocated}, {"Active memory", &s.Active},
		{"Requested memory", &s.Requested}, {"GPU reserved memory", &s.Reserved},
		{"Non-releasable memory", &s.NonReleasable},
		{"Allocations", &s.Allocations}, {"Active allocs", &s.ActiveAllocs},
		{"GPU reserved segments", &s.Segments}, {"Non-releasable allocs", &s.NonReleasableAllocs},
		{"Oversize allocations", &s.OversizeAllocations}, {"Oversize GPU segments", &s.OversizeSegments},
	}
}

// summaryRow is one metric: dest is a *SizeStat, *CountStat or *Counts.
type summaryRow struct {
	name string
	dest any
}

// ParseMemorySummaries finds every memory_summary table in r, in order. Text
// around and before each table line (log prefixes such as "[rank0]:") is
// ignored. It returns an error wrapping ErrUnrecognized when there is no
// table, and a line-numbered error for a table row it cannot read.
func ParseMemorySummaries(r io.Reader) ([]MemorySummary, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading memory summary: %w", err)
	}
	var out []MemorySummary
	var cur *summaryParser
	n := 0
	for line := range strings.Lines(string(data)) {
		n++
		line = strings.TrimRight(line, "\r\n")
		if m := summaryTitle.FindStringSubmatch(line); m != nil {
			cur = newSummaryParser(n, m[1])
			out = append(out, MemorySummary{})
			continue
		}
		if cur == nil {
			continue
		}
		done, err := cur.line(line)
		if err != nil {
			return nil, fmt.Errorf("memory summary line %d: %w", n, err)
		}
		if done {
			out[len(out)-1] = cur.finish()
			cur = nil
		}
	}
	if cur != nil { // the input ended inside a table: keep what it had
		out[len(out)-1] = cur.finish()
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no memory_summary table: %w", ErrUnrecognized)
	}
	return out, nil
}

// summaryParser reads the lines of one table after its title.
type summaryParser struct {
	s        MemorySummary
	rows     map[string]summaryRow
	seen     map[string]bool
	last     any  // the metric the next "from ... pool" line belongs to
	inBody   bool // past the "Metric | Cur Usage | ..." header
	perPools bool // some "from ... pool" line was seen
}

func newSummaryParser(line int, device string) *summaryParser {
	p := &summaryParser{rows: map[string]summaryRow{}, seen: map[string]bool{}}
	p.s.Line = line
	p.s.Device, _ = strconv.Atoi(device) // \d+ of a device index fits an int
	for _, r := range summaryRows(&p.s) {
		p.rows[r.name] = r
	}
	return p
}

// line consumes one line and reports whether the table ended with it.
func (p *summaryParser) line(line string) (done bool, err error) {
	i := strings.IndexByte(line, '|')
	if i < 0 {
		return true, nil // prose after a table that lost its closing rule
	}
	cells := strings.Split(strings.Trim(strings.TrimSpace(line[i:]), "|"), "|")
	if len(cells) == 1 { // a "====" or "----" rule
		return p.inBody && strings.HasPrefix(strings.TrimSpace(cells[0]), "="), nil
	}
	name := strings.TrimSpace(cells[0])
	switch {
	case strings.Contains(line, "CUDA OOMs:"):
		return false, p.counters(line)
	case name == "Metric":
		p.inBody = true
		return false, nil
	case len(cells) != 5:
		return false, fmt.Errorf("want a name and 4 columns, got %d cells", len(cells))
	}
	values := cells[1:]
	switch name {
	case "from large pool", "from small pool":
		p.perPools = true
		return false, p.poolRow(name, values)
	}
	row, ok := p.rows[name]
	if !ok {
		p.last = nil
		return false, nil
	}
	p.seen[name] = true
	p.last = row.dest
	switch dest := row.dest.(type) {
	case *SizeStat:
		dest.All, err = parseSizes(values)
	case *CountStat:
		dest.All, err = parseCounts(values)
	case *Counts:
		*dest, err = parseCounts(values)
	}
	if err != nil {
		return false, fmt.Errorf("%s: %w", name, err)
	}
	return false, nil
}

// poolRow fills the LargePool or SmallPool of the metric above it.
func (p *summaryParser) poolRow(name string, values []string) (err error) {
	large := name == "from large pool"
	switch dest := p.last.(type) {
	case *SizeStat:
		pool := &dest.SmallPool
		if large {
			pool = &dest.LargePool
		}
		*pool, err = parseSizes(values)
	case *CountStat:
		pool := &dest.SmallPool
		if large {
			pool = &dest.LargePool
		}
		*pool, err = parseCounts(values)
	default:
		return nil // under a row we skip or one without pools
	}
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func (p *summaryParser) counters(line string) error {
	for _, c := range []struct {
		re   *regexp.Regexp
		dest *int64
	}{{summaryOOMs, &p.s.OOMs}, {summaryRetries, &p.s.AllocRetries}} {
		m := c.re.FindStringSubmatch(line)
		if m == nil {
			return fmt.Errorf("no %q in counters line", c.re.String())
		}
		v, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			return fmt.Errorf("counters line: %w", err)
		}
		*c.dest = v
	}
	return nil
}

func (p *summaryParser) finish() MemorySummary {
	p.s.Abbreviated = !p.perPools
	for _, r := range summaryRows(&p.s) {
		if !p.seen[r.name] {
			p.s.Missing = append(p.s.Missing, r.name)
		}
	}
	return p.s
}

// parseSizes reads the four size cells of a row ("184648 KiB", "0 B").
func parseSizes(cells []string) (Sizes, error) {
	var v [4]units.Bytes
	for i, c := range cells {
		b, err := units.ParseBytes(strings.TrimSpace(c))
		if err != nil {
			return Sizes{}, err
		}
		v[i] = b
	}
	return Sizes{v[0], v[1], v[2], v[3]}, nil
}

// countScale maps the suffix memory_summary's count formatter appends.
var countScale = map[string]int64{"": 1, "K": 1000, "M": 1000 * 1000}

// parseCounts reads the four count cells of a row ("21", "3456 K").
func parseCounts(cells []string) (Counts, error) {
	var v [4]int64
	for i, c := range cells {
		num, suffix, _ := strings.Cut(strings.TrimSpace(c), " ")
		n, err := strconv.ParseInt(num, 10, 64)
		scale, ok := countScale[strings.TrimSpace(suffix)]
		if err != nil || !ok {
			return Counts{}, fmt.Errorf("bad count %q", strings.TrimSpace(c))
		}
		v[i] = n * scale
	}
	return Counts{v[0], v[1], v[2], v[3]}, nil
}

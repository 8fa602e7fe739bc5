package memlog

import (
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"github.com/vramscope/vramscope/internal/units"
)

// OOMMessage is one "CUDA out of memory" message, whatever torch release
// wrote it.
//
// Every size in it was printed by the caching allocator's format_size with
// two decimals ("6.05 GiB"), so each field is the printed number times its
// unit, rounded to a byte: within half a unit of the last decimal of the true
// value (±5.12 MiB for a GiB figure). Sums and differences of these fields
// carry that error too.
type OOMMessage struct {
	Line    int     `json:"line"`    // 1-based line of the input where the message starts
	Text    string  `json:"text"`    // the message with line wraps undone, without torch's advice
	Wording Wording `json:"wording"` // which release family's wording it uses

	TriedToAllocate units.Bytes `json:"tried_to_allocate_bytes"` // the allocator's request: the block or segment size, not the tensor's
	Device          int         `json:"device"`                  // the "GPU N" index
	TotalCapacity   units.Bytes `json:"total_capacity_bytes"`    // cudaMemGetInfo total
	Free            units.Bytes `json:"free_bytes"`              // cudaMemGetInfo free at the failure

	// Processes lists NVML's per-process usage in message order (torch ≥ 2.1;
	// empty when NVML was unavailable or for older messages).
	Processes []ProcessMemory `json:"processes"`

	// Allowed is set_per_process_memory_fraction × total capacity; zero when
	// the message has no "allowed" clause, i.e. no fraction was set.
	Allowed units.Bytes `json:"allowed_bytes"`

	// Allocated is what PyTorch reports as allocated: "already allocated"
	// (≤ 2.0) or "is allocated by PyTorch" (≥ 2.1). Since private-pool
	// accounting appeared it includes PrivatePools.
	Allocated units.Bytes `json:"allocated_bytes"`
	// PrivatePools is the "with P allocated in private pools (e.g., CUDA
	// Graphs)" figure: cached blocks owned by CUDA-graph or MemPool pools,
	// which only those pools can reuse. Zero when the clause is absent, which
	// is also how torch prints zero.
	PrivatePools units.Bytes `json:"private_pools_bytes"`
	// Reserved is all memory the caching allocator holds. Messages ≤ 2.0
	// print it; later ones print ReservedUnallocated, and Reserved is derived
	// as Allocated + ReservedUnallocated.
	Reserved units.Bytes `json:"reserved_bytes"`
	// ReservedUnallocated is memory reserved but not allocated, i.e. trapped
	// in partly used segments, since the allocator already released every
	// wholly free one before failing. Derived as Reserved − Allocated (never
	// below zero) for messages ≤ 2.0.
	ReservedUnallocated units.Bytes `json:"reserved_unallocated_bytes"`

	// Missing names the clauses this message's wording should have but the
	// text lacks (a message cut off in a log, say); their fields are zero.
	Missing []string `json:"missing"`
}

// ProcessMemory is one "Process <pid> has U memory in use" clause.
type ProcessMemory struct {
	PID   int         `json:"pid"` // 0 for "this process", the one that raised the error, whose pid torch does not print
	InUse units.Bytes `json:"in_use_bytes"`
}

// Wording tells which torch release family wrote an OOM message; the same
// numbers are phrased differently in each.
type Wording uint8

const (
	// LegacyWording (torch ≤ 2.0): "Tried to allocate X (GPU N; T total
	// capacity; A already allocated; F free; [L allowed; ]R reserved in
	// total by PyTorch)"; releases before 1.4 said "R cached".
	LegacyWording Wording = iota
	// CapactyWording (torch 2.1–2.2): "GPU N has a total capacty of T" (sic),
	// with per-process usage and "reserved by PyTorch but unallocated".
	CapactyWording
	// CurrentWording (torch ≥ 2.3): as 2.1 with the typo fixed; newer
	// releases add the private-pool clause.
	CurrentWording
)

func (w Wording) String() string {
	switch w {
	case LegacyWording:
		return "torch <= 2.0"
	case CapactyWording:
		return "torch 2.1-2.2"
	case CurrentWording:
		return "torch >= 2.3"
	}
	return "Wording(" + strconv.Itoa(int(w)) + ")"
}

// MarshalText writes the release family in JSON ("torch >= 2.3") rather
// than a number whose meaning lives in this file.
func (w Wording) MarshalText() ([]byte, error) { return []byte(w.String()), nil }

// oomSize matches one format_size output: "0 bytes", "512 bytes",
// "20.00 MiB", "931322.58 GiB".
const oomSize = `(\d+(?:\.\d+)? (?:bytes|B|KiB|MiB|GiB|TiB|PiB|EiB))`

// wrapped compiles a pattern whose single spaces may be any run of white
// space in the input, because pasted messages are often re-wrapped at any
// word boundary, including between a number and its unit.
func wrapped(pattern string) *regexp.Regexp {
	return regexp.MustCompile(strings.ReplaceAll(pattern, " ", `\s+`))
}

var (
	// oomStart finds a message. The "Tried to allocate" makes it the
	// allocator's OOM, not cuBLAS's or the driver's "CUDA error: out of
	// memory"; HIP and XPU builds print the same text under their own name.
	oomStart = wrapped(`(?:CUDA|HIP|XPU) out of memory\. Tried to allocate ` + oomSize)
	// oomEnd ends a message: torch's advice sentence (every wording has one
	// starting "If reserved") or a blank line for messages without it.
	oomEnd = regexp.MustCompile(`If\s+reserved|\n[ \t]*\r?\n`)

	oomLegacy      = wrapped(`\(GPU \d+;`)
	oomCapacty     = wrapped(`total capacty of`)
	oomDevice      = wrapped(`GPU (\d+)(?:;| has)`)
	oomTotal       = wrapped(oomSize + ` total capacity;|total capac(?:i|)ty of ` + oomSize)
	oomFree        = wrapped(oomSize + ` free;|of which ` + oomSize + ` is free`)
	oomAllowed     = wrapped(oomSize + ` allowed;`)
	oomProcess     = wrapped(`(?:Process (\d+)|this process) has ` + oomSize + ` memory in use`)
	oomAllocated   = wrapped(oomSize + ` already allocated|Of the allocated memory ` + oomSize + ` is allocated by PyTorch`)
	oomPrivate     = wrapped(`with ` + oomSize + ` allocated in private pools`)
	oomReserved    = wrapped(oomSize + ` (?:reserved in total by PyTorch|cached\))`)
	oomUnallocated = wrapped(oomSize + ` is reserved by PyTorch but unallocated`)
)

// oomMaxLen bounds a message that has neither advice nor a blank line after
// it; the longest wording with a dozen processes listed stays well under it.
const oomMaxLen = 4096

// ParseOOMMessages finds every OOM message in r, in order. The text around
// them (tracebacks, log lines) is ignored. It returns an error wrapping
// ErrUnrecognized when there is none.
func ParseOOMMessages(r io.Reader) ([]OOMMessage, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading OOM messages: %w", err)
	}
	text := string(data)
	starts := oomStart.FindAllStringIndex(text, -1)
	if len(starts) == 0 {
		return nil, fmt.Errorf("no %q message: %w", "CUDA out of memory", ErrUnrecognized)
	}
	msgs := make([]OOMMessage, 0, len(starts))
	for i, start := range starts {
		end := len(text)
		if i+1 < len(starts) {
			end = starts[i+1][0]
		}
		end = min(end, start[0]+oomMaxLen)
		window := text[start[0]:end]
		if loc := oomEnd.FindStringIndex(window); loc != nil {
			window = window[:loc[0]]
		}
		line := 1 + strings.Count(text[:start[0]], "\n")
		m, err := parseOOMMessage(window)
		if err != nil {
			return nil, fmt.Errorf("OOM message at line %d: %w", line, err)
		}
		m.Line = line
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// parseOOMMessage reads the clauses of one message, which starts at "CUDA
// out of memory" and ends before torch's advice.
func parseOOMMessage(s string) (OOMMessage, error) {
	m := OOMMessage{Text: strings.Join(strings.Fields(s), " "), Wording: CurrentWording}
	switch {
	case oomLegacy.MatchString(s):
		m.Wording = LegacyWording
	case oomCapacty.MatchString(s):
		m.Wording = CapactyWording
	}
	// p collects the first size-parsing error so each clause below stays one
	// line; the regexps guarantee the syntax, so only range errors remain.
	p := sizeParser{}
	m.TriedToAllocate = p.parse(oomStart.FindStringSubmatch(s)[1])
	if sub := oomDevice.FindStringSubmatch(s); sub != nil {
		m.Device, _ = strconv.Atoi(sub[1]) // \d+ of a GPU index fits an int
	} else {
		m.Missing = append(m.Missing, "GPU")
	}
	m.TotalCapacity = p.clause(&m, "total capacity", oomTotal, s)
	m.Free = p.clause(&m, "free", oomFree, s)
	m.Allocated = p.clause(&m, "allocated", oomAllocated, s)
	if sub := oomAllowed.FindStringSubmatch(s); sub != nil {
		m.Allowed = p.parse(sub[1])
	}
	if sub := oomPrivate.FindStringSubmatch(s); sub != nil {
		m.PrivatePools = p.parse(sub[1])
	}
	for _, sub := range oomProcess.FindAllStringSubmatch(s, -1) {
		pid, _ := strconv.Atoi(sub[1]) // "" for "this process" gives 0
		m.Processes = append(m.Processes, ProcessMemory{PID: pid, InUse: p.parse(sub[2])})
	}
	if m.Wording == LegacyWording {
		m.Reserved = p.clause(&m, "reserved", oomReserved, s)
		m.ReservedUnallocated = max(0, m.Reserved-m.Allocated) // rounding could make it dip below
	} else {
		m.ReservedUnallocated = p.clause(&m, "reserved but unallocated", oomUnallocated, s)
		m.Reserved = m.Allocated + m.ReservedUnallocated
	}
	return m, p.err
}

// sizeParser parses sizes captured by the clause regexps and remembers the
// first error.
type sizeParser struct{ err error }

func (p *sizeParser) parse(s string) units.Bytes {
	b, err := units.ParseBytes(s)
	if err != nil && p.err == nil {
		p.err = err
	}
	return b
}

// clause parses the size of the clause re finds in s, or notes the clause in
// m.Missing. Regexps with alternatives capture the size in one of two
// groups; the other is empty.
func (p *sizeParser) clause(m *OOMMessage, name string, re *regexp.Regexp, s string) units.Bytes {
	sub := re.FindStringSubmatch(s)
	if sub == nil {
		m.Missing = append(m.Missing, name)
		return 0
	}
	for _, g := range sub[1:] {
		if g != "" {
			return p.parse(g)
		}
	}
	return 0
}

package memlog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/vramscope/vramscope/internal/units"
)

// OOMMessage is one out-of-memory error found in a log: the caching
// allocator's "CUDA out of memory" message of any torch release, the
// cudaMallocAsync backend's, or an OOM raised outside PyTorch's allocators
// (a CUDA call, cuBLAS, NCCL).
//
// Every fact is a pointer: nil means the message does not state it (older
// wordings lack some clauses, a log may cut a message short, non-allocator
// errors state almost nothing), which is not the same as zero. Every size
// was printed by format_size with two decimals ("6.05 GiB"), so each is the
// printed number times its unit, rounded to a byte: within half a unit of
// the last decimal of the true value (±5.12 MiB for a GiB figure).
type OOMMessage struct {
	Line int    `json:"line"` // 1-based line of the input where the message starts
	Text string `json:"text"` // the message with line wraps undone, without torch's advice
	// Also lists the lines where the same text appears again (a logger and
	// a traceback printing one failure twice).
	Also []int `json:"also_at_lines,omitempty"`

	Source  Source  `json:"source"`
	Library string  `json:"library,omitempty"` // for LibraryOOM: "cuBLAS", "cuDNN", ...
	Wording Wording `json:"wording,omitempty"` // for the caching allocator: which release family wrote it
	// PlatformLimit: Intel's XPU allocator refused a block above 4 GB, a
	// limit of the platform whatever the free memory.
	PlatformLimit bool `json:"platform_limit,omitempty"`

	// Rank and PID come from the log line's own prefix ("[rank3]:",
	// "(WorkerDict pid=2917)"), not from the message.
	Rank *int `json:"rank,omitempty"`
	PID  *int `json:"pid,omitempty"`

	Device *int `json:"device,omitempty"` // "GPU N", "device N"
	// TriedToAllocate is the allocator's request: the block or segment
	// size, not the tensor's ("Tried to allocate", "Requested", NCCL's
	// "Failed to CUDA calloc N bytes").
	TriedToAllocate *units.Bytes `json:"tried_to_allocate_bytes,omitempty"`
	TotalCapacity   *units.Bytes `json:"total_capacity_bytes,omitempty"` // cudaMemGetInfo total
	Free            *units.Bytes `json:"free_bytes,omitempty"`           // cudaMemGetInfo free at the failure
	// Allowed is set_per_process_memory_fraction × total capacity (the
	// caching allocator's "allowed" clause, the cudaMallocAsync backend's
	// "PyTorch limit").
	Allowed *units.Bytes `json:"allowed_bytes,omitempty"`
	// ThisProcess is NVML's usage of the process that raised the error,
	// non-PyTorch memory included ("Including non-PyTorch memory, this
	// process has"; torch ≥ 2.1).
	ThisProcess *units.Bytes `json:"this_process_bytes,omitempty"`
	// Processes are NVML's other "Process <pid> has U memory in use"
	// clauses, in message order. In a container NVML's pids are the host's,
	// torch cannot match its own, and this process is listed here too.
	Processes []ProcessMemory `json:"processes,omitempty"`

	// Allocated is what PyTorch reports as allocated: "already allocated"
	// (≤ 2.0), "is allocated by PyTorch" (≥ 2.1), "Currently allocated"
	// (cudaMallocAsync). Since private-pool accounting appeared it includes
	// PrivatePools.
	Allocated *units.Bytes `json:"allocated_bytes,omitempty"`
	// PrivatePools is "with P allocated in private pools (e.g., CUDA
	// Graphs)": blocks of CUDA-graph or MemPool pools, which only those
	// pools can reuse. Absent also when it is zero: torch then omits it.
	PrivatePools *units.Bytes `json:"private_pools_bytes,omitempty"`
	// Reserved is all memory the caching allocator holds: printed by 1.4 to
	// 2.0, derived as Allocated + ReservedUnallocated otherwise.
	Reserved *units.Bytes `json:"reserved_bytes,omitempty"`
	// ReservedUnallocated is memory reserved but not allocated: free
	// blocks trapped in partly used segments, since the allocator already
	// released every wholly free one before failing. Printed by ≤ 1.3
	// ("cached") and ≥ 2.1; Reserved − Allocated for 1.4 to 2.0.
	ReservedUnallocated *units.Bytes `json:"reserved_unallocated_bytes,omitempty"`

	// Missing names the clauses this message's wording should have but the
	// text lacks (a message cut off in a log, say).
	Missing []string `json:"missing,omitempty"`
	// Unavailable names the clauses printed as 16 EiB or more: the all-ones
	// "not available" value (NVML's usage under WSL, the cudaMallocAsync
	// backend's limit when no fraction is set) through format_size. They
	// are absent above, except a request, which keeps the largest size.
	Unavailable []string `json:"unavailable,omitempty"`
}

// ProcessMemory is one "Process <pid> has U memory in use" clause.
type ProcessMemory struct {
	PID   int         `json:"pid"`
	InUse units.Bytes `json:"in_use_bytes"`
}

// Source is what raised an out-of-memory error.
type Source uint8

const (
	// CachingAllocator: PyTorch's native allocator, "CUDA out of memory.
	// Tried to allocate ..." (HIP, XPU and MUSA builds print their name).
	CachingAllocator Source = iota
	// MallocAsync: PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync,
	// "Allocation on device N would exceed allowed memory. (out of memory)".
	MallocAsync
	// CUDARuntime: a CUDA or HIP call outside the allocator ran out:
	// "CUDA error: out of memory", cudaErrorMemoryAllocation,
	// CUDA_ERROR_OUT_OF_MEMORY, hipErrorOutOfMemory, and torch ≤ 0.4's
	// "cuda runtime error (2) : out of memory".
	CUDARuntime
	// LibraryOOM: a CUDA library's own allocation failed
	// (CUBLAS_STATUS_ALLOC_FAILED and its cuDNN, cuSOLVER, cuSPARSE, cuFFT
	// twins).
	LibraryOOM
	// NCCL: NCCL's buffers ("Cuda failure 'out of memory'", "Failed to CUDA
	// calloc").
	NCCL
)

var sourceNames = []string{"caching_allocator", "cuda_malloc_async", "cuda_runtime", "cuda_library", "nccl"}

func (s Source) String() string {
	if int(s) < len(sourceNames) {
		return sourceNames[s]
	}
	return "Source(" + strconv.Itoa(int(s)) + ")"
}

// MarshalText writes the name in JSON rather than a number.
func (s Source) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads what MarshalText wrote.
func (s *Source) UnmarshalText(b []byte) error {
	i := slices.Index(sourceNames, string(b))
	if i < 0 {
		return fmt.Errorf("unknown OOM source %q", b)
	}
	*s = Source(i)
	return nil
}

// Wording tells which torch release family wrote a caching-allocator
// message; the same numbers are phrased, and in one case meant,
// differently in each.
type Wording uint8

const (
	// NoWording: the message is not the caching allocator's.
	NoWording Wording = iota
	// CachedWording (torch ≤ 1.3): "(GPU N; T total capacity; A already
	// allocated; F free; C cached)", where C is reserved minus allocated.
	CachedWording
	// LegacyWording (torch 1.4–2.0): "(GPU N; T total capacity; A already
	// allocated; F free; [L allowed; ]R reserved in total by PyTorch)".
	LegacyWording
	// CapactyWording (torch 2.1–2.2): "GPU N has a total capacty of T" (sic),
	// with per-process usage and "reserved by PyTorch but unallocated".
	CapactyWording
	// CurrentWording (torch ≥ 2.3): as 2.1 with the typo fixed; newer
	// releases add the private-pool clause.
	CurrentWording
)

func (w Wording) String() string {
	switch w {
	case NoWording:
		return ""
	case CachedWording:
		return "torch <= 1.3"
	case LegacyWording:
		return "torch 1.4-2.0"
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

// UnmarshalText reads what MarshalText wrote.
func (w *Wording) UnmarshalText(b []byte) error {
	for v := NoWording; v <= CurrentWording; v++ {
		if v.String() == string(b) {
			*w = v
			return nil
		}
	}
	return fmt.Errorf("unknown OOM message wording %q", b)
}

// Pasted messages are re-wrapped at any word boundary, glued into log or
// JSON lines with escaped newlines, and sometimes cut inside a number. The
// patterns below are written with single spaces; wrapped turns each into
// space, where any run of white space or escaped line breaks may stand.
const (
	space = `(?:\s|\\+[nrt])+`
	// brk is a line break inside a number ("23.6\n5 GiB").
	brk = `(?:\r?\n[\x20\t]*|\\+n)` // no literal space: wrapped would rewrite it
	// oomSize matches one format_size output: "0 bytes", "512 bytes",
	// "20.00 MiB", "931322.58 GiB", possibly broken across lines.
	oomSize = `(\d+(?:` + brk + `\d+)*(?:\.(?:` + brk + `)?\d+(?:` + brk + `\d+)*)? (?:bytes|B|KiB|MiB|GiB|TiB|PiB|EiB))`
	oomInt  = `(\d+(?:` + brk + `\d+)*)`
)

func wrapped(pattern string) *regexp.Regexp {
	return regexp.MustCompile(strings.ReplaceAll(pattern, " ", space))
}

var (
	// oomStart finds a caching-allocator message. Wording from
	// c10/cuda/CUDACachingAllocator.cpp: "CUDA out of memory. Tried to
	// allocate" in every release since 1.0; HIP builds (ROCm) print "HIP",
	// XPU and MUSA builds their own name. allocate() refuses sizes of 1 EiB
	// and more with "Tried to allocate more than 1EB memory." (2.x).
	oomStart = wrapped(`(?:CUDA|HIP|XPU|MUSA) out of memory\. Tried to allocate (?:` + oomSize + `|more than 1EB memory)`)
	// bareStart is a message pasted without its first words, and Intel's
	// XPU allocator's "Current platform can NOT allocate memory block with
	// size larger than 4GB! Tried to allocate ..." (intel-extension-for-
	// pytorch): the GPU clause after the size tells it from prose.
	bareStart  = wrapped(`Tried to allocate ` + oomSize + ` ?(?:\(GPU|\. GPU)`)
	oomRequest = wrapped(`Tried to allocate ` + oomSize)
	// platformLimit is that XPU refusal: no block above 4 GB at all.
	platformLimit = wrapped(`can NOT allocate memory block with size larger than 4GB`)
	// asyncStart is the cudaMallocAsync backend's message
	// (c10/cuda/CUDAMallocAsyncAllocator.cpp, mallocAsync, torch 2.x, read
	// at pytorch commit 03459473): "Allocation on device N would exceed
	// allowed memory. (out of memory)" followed by aligned "Currently
	// allocated : ...", "Requested", "Device limit" and "Free (according to
	// CUDA)" lines; later releases add "PyTorch limit (set by user-supplied
	// memory fraction)".
	asyncStart = wrapped(`Allocation on device ` + oomInt + ` would exceed allowed memory\. \(out of memory\)`)

	// oomEnd ends a message: torch's advice sentence ("If reserved memory
	// is >>" ≤ 2.0, "If reserved but unallocated" ≥ 2.1), a blank line, or
	// a quote that closes a repr or JSON string (no wording contains one).
	oomEnd = regexp.MustCompile(`If\s+reserved|\n[ \t]*\r?\n|\\n\\n|["'` + "`]")

	oomCachedWording  = wrapped(`\(GPU \d+;[^()]*?cached\)`)
	oomLegacyWording  = wrapped(`\(GPU \d+;`)
	oomCapactyWording = wrapped(`total capacty of`)

	oomDevice      = wrapped(`GPU ` + oomInt + `(?:;| has)`)
	oomTotal       = wrapped(oomSize + ` total capacity;|total capac(?:i|)ty of ` + oomSize)
	oomFree        = wrapped(oomSize + ` free;|of which ` + oomSize + ` is free`)
	oomAllowed     = wrapped(oomSize + ` allowed;`)
	oomThis        = wrapped(`this process has ` + oomSize + ` memory in use`)
	oomProcess     = wrapped(`Process ` + oomInt + ` has ` + oomSize + ` memory in use`)
	oomAllocated   = wrapped(oomSize + ` already allocated|Of the allocated memory ` + oomSize + ` is allocated by PyTorch`)
	oomPrivate     = wrapped(`with ` + oomSize + ` allocated in private pools`)
	oomReserved    = wrapped(oomSize + ` reserved in total by PyTorch\)?`)
	oomCached      = wrapped(oomSize + ` cached\)`)
	oomUnallocated = wrapped(oomSize + ` is reserved by PyTorch but unallocated`)

	asyncAllocated = wrapped(`Currently allocated\s*: ` + oomSize)
	asyncRequested = wrapped(`Requested\s*: ` + oomSize)
	asyncTotal     = wrapped(`Device limit\s*: ` + oomSize)
	asyncFree      = wrapped(`Free \(according to CUDA\)\s*: ` + oomSize)
	asyncLimit     = wrapped(`PyTorch limit \(set by user-supplied memory fraction\)\s*: ` + oomSize)

	// ncclCalloc is NCCL's include/alloc.h warning, which names the size.
	ncclCalloc = regexp.MustCompile(`Failed to CUDA (?:calloc|malloc|host alloc) (\d+) bytes`)
)

// otherOOMs are the out-of-memory errors that carry no allocator message,
// each recognised by the phrase its source prints.
var otherOOMs = []struct {
	re      *regexp.Regexp
	source  Source
	library string
}{
	// NCCL (2.x) warns through its CUDACHECK macro (src/include/checks.h),
	// "Cuda failure '%s'" with the CUDA error string, or "Cuda failure 2
	// 'out of memory'" with its number; src/include/alloc.h warns "Failed
	// to CUDA calloc N bytes".
	{regexp.MustCompile(`Cuda failure (?:\d+ )?'out of memory'|Failed to CUDA (?:calloc|malloc|host alloc) \d+ bytes`), NCCL, ""},
	// The cuBLAS, cuDNN, cuSOLVER, cuSPARSE and cuFFT status codes, as
	// torch's checks print them (aten/src/ATen/cuda/Exceptions.h,
	// TORCH_CUDABLAS_CHECK and its twins, torch 1.x and 2.x: "CUDA error:
	// CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"), and
	// their ROCm names (hipified, rocBLAS, MIOpen).
	{regexp.MustCompile(`CUBLAS_STATUS_ALLOC_FAILED`), LibraryOOM, "cuBLAS"},
	{regexp.MustCompile(`HIPBLAS_STATUS_ALLOC_FAILED`), LibraryOOM, "hipBLAS"},
	{regexp.MustCompile(`rocblas_status_memory_error`), LibraryOOM, "rocBLAS"},
	{regexp.MustCompile(`miopenStatusAllocFailed`), LibraryOOM, "MIOpen"},
	{regexp.MustCompile(`CUDNN_STATUS_ALLOC_FAILED`), LibraryOOM, "cuDNN"},
	{regexp.MustCompile(`CUSOLVER_STATUS_ALLOC_FAILED`), LibraryOOM, "cuSOLVER"},
	{regexp.MustCompile(`CUSPARSE_STATUS_ALLOC_FAILED`), LibraryOOM, "cuSPARSE"},
	{regexp.MustCompile(`CUFFT_ALLOC_FAILED`), LibraryOOM, "cuFFT"},
	// C10_CUDA_CHECK (torch ≥ 1.0): "CUDA error: out of memory"; THCudaCheck
	// (torch ≤ 0.4): "cuda runtime error (2) : out of memory"; the runtime's
	// and driver's error names as other libraries print them.
	// vLLM's cumem allocator (sleep mode) prints "CUDA Error: out of
	// memory at csrc/cumem_allocator.cpp"; torch 0.1 "cuda runtime err(2):".
	{regexp.MustCompile(`(?i:(?:CUDA|HIP) error): out of memory|cuda runtime err(?:or)? ?\(2\) ?: out of memory|cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY|hipErrorOutOfMemory`), CUDARuntime, ""},
	// The cudaMallocAsync backend's message cut after its first words.
	{regexp.MustCompile(`(?m)OutOfMemoryError: Allocation on device[ \t]*\r?$`), MallocAsync, ""},
	// vLLM replaces the allocator's message when its sampler warm-up runs
	// out (vllm/v1/worker/gpu_model_runner.py): "CUDA out of memory occurred
	// when warming up sampler with N dummy requests".
	{regexp.MustCompile(`CUDA out of memory occurred when [^\n]*`), CachingAllocator, ""},
}

// A log prefix may name the process: torchrun's "[rank3]:", Ray's
// "(WorkerDict pid=2917)", vLLM's "(VllmWorker rank=0 pid=123)".
var (
	prefixRank = regexp.MustCompile(`(?i)\brank[ =:]?(\d+)\b`)
	prefixPID  = regexp.MustCompile(`(?i)\bpid[ =:]?(\d+)\b`)
)

const (
	// oomMaxLen bounds a message that has neither advice nor a blank line
	// after it; the longest wording with a dozen processes listed stays
	// well under it.
	oomMaxLen = 4096
	// otherMaxLen bounds the text kept of a non-allocator error line.
	otherMaxLen = 400
	// prefixLen is how far before a message its log prefix is looked for.
	prefixLen = 120
)

// oomWords: every error ParseOOMMessages reads contains one of these. A
// plain search for them spares the regexps a long text with none (a day of
// serving logs: a minute of regexps).
var oomWords = [][]byte{[]byte("out of memory"), []byte("OutOfMemory"), []byte("OUT_OF_MEMORY"),
	[]byte("ALLOC_FAILED"), []byte("AllocFailed"), []byte("memory_error"), []byte("MemoryAllocation"),
	[]byte("Failed to CUDA")}

// MentionsOOM reports whether data holds a word every out-of-memory
// error ParseOOMMessages reads contains: a long log that mentions none
// needs no closer look. A log read in pieces that overlap by MaxOOMWord-1 bytes
// mentions one when a piece does.
func MentionsOOM(data []byte) bool {
	return slices.ContainsFunc(oomWords, func(w []byte) bool { return bytes.Contains(data, w) })
}

// MaxOOMWord is the length of the longest word MentionsOOM looks for.
const MaxOOMWord = len("MemoryAllocation")

// ContainsOOM reports whether data holds an out-of-memory error that
// ParseOOMMessages reads.
func ContainsOOM(data []byte) bool {
	if !MentionsOOM(data) {
		return false
	}
	if oomStart.Match(data) || bareStart.Match(data) || asyncStart.Match(data) {
		return true
	}
	text := string(data)
	for _, o := range otherOOMs {
		for _, loc := range o.re.FindAllStringIndex(text, -1) {
			if !quoted(text, loc) {
				return true
			}
		}
	}
	return false
}

// quoted reports whether the match at loc is a whole code span
// ("`CUDA error: out of memory`"): documentation naming an error, not a
// log raising it. The allocators' messages carry sizes, which prose does
// not, and need no such test.
func quoted(text string, loc []int) bool {
	return loc[0] > 0 && loc[1] < len(text) && text[loc[0]-1] == '`' && text[loc[1]] == '`'
}

// ParseOOMMessages finds every out-of-memory message in r, in order. The
// text around them (tracebacks, log lines) is ignored. A message repeated
// word for word is one message seen at several lines. A non-allocator error
// is one message per source and process however many lines repeat it (NCCL
// warns on every rank and again in the exception). It returns an error
// wrapping ErrUnrecognized when there is none.
func ParseOOMMessages(r io.Reader) ([]OOMMessage, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading OOM messages: %w", err)
	}
	text := string(data)
	type found struct {
		start, end int
		// parse reads the message at the start of window and says how
		// much of it the message takes.
		parse func(window string) (OOMMessage, int, error)
	}
	var all []found
	for _, re := range []*regexp.Regexp{oomStart, bareStart, asyncStart} {
		for _, loc := range re.FindAllStringIndex(text, -1) {
			all = append(all, found{loc[0], loc[1], parseAllocatorMessage})
		}
	}
	for _, o := range otherOOMs {
		for _, loc := range o.re.FindAllStringIndex(text, -1) {
			if quoted(text, loc) {
				continue
			}
			all = append(all, found{loc[0], loc[1], func(window string) (OOMMessage, int, error) {
				m, n := parseOtherMessage(window, o.source, o.library)
				return m, n, nil
			}})
		}
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("no out-of-memory message (\"CUDA out of memory\", \"CUDA error: out of memory\", ...): %w", ErrUnrecognized)
	}
	slices.SortFunc(all, func(a, b found) int { return a.start - b.start })
	// A match inside another's ("Tried to allocate" of a whole message)
	// is the same message.
	kept := all[:1]
	for _, f := range all[1:] {
		if f.start >= kept[len(kept)-1].end {
			kept = append(kept, f)
		}
	}
	all = kept

	var msgs []OOMMessage
	seen := map[string]int{} // dedup key -> index in msgs
	covered := 0             // end of the last message
	for i, f := range all {
		if f.start < covered {
			continue // inside the last message (NCCL's line naming cudaErrorMemoryAllocation, say)
		}
		end := len(text)
		if i+1 < len(all) {
			end = all[i+1].start
		}
		window := text[f.start:min(end, f.start+oomMaxLen)]
		line := 1 + strings.Count(text[:f.start], "\n")
		m, n, err := f.parse(window)
		if err != nil {
			return nil, fmt.Errorf("OOM message at line %d: %w", line, err)
		}
		m.Line = line
		m.Rank, m.PID = prefixIdentity(text[:f.start])
		covered = f.start + n
		key := dedupKey(m)
		if j, ok := seen[key]; ok {
			if msgs[j].Line != line && !slices.Contains(msgs[j].Also, line) {
				msgs[j].Also = append(msgs[j].Also, line)
			}
			continue
		}
		seen[key] = len(msgs)
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// dedupKey is what makes two messages of one file the same failure: the
// same text for an allocator message, the same source and process for the
// others.
func dedupKey(m OOMMessage) string {
	id := fmt.Sprint(deref(m.Rank), m.Rank != nil, deref(m.PID), m.PID != nil)
	if m.Source == CachingAllocator || m.Source == MallocAsync {
		return id + m.Text
	}
	return id + m.Source.String() + m.Library
}

func deref(p *int) int {
	if p == nil {
		return -1
	}
	return *p
}

// prefixIdentity reads a rank and pid from the log prefix of the line that
// ends where a message starts.
func prefixIdentity(before string) (rank, pid *int) {
	if i := strings.LastIndexByte(before, '\n'); i >= 0 {
		before = before[i+1:]
	}
	if i := strings.LastIndex(before, `\n`); i >= 0 {
		before = before[i+2:]
	}
	before = before[max(0, len(before)-prefixLen):]
	read := func(re *regexp.Regexp) *int {
		if sub := re.FindAllStringSubmatch(before, -1); sub != nil {
			if n, err := strconv.Atoi(sub[len(sub)-1][1]); err == nil {
				return &n
			}
		}
		return nil
	}
	return read(prefixRank), read(prefixPID)
}

// parseAllocatorMessage reads a caching-allocator or cudaMallocAsync
// message from the start of window.
func parseAllocatorMessage(window string) (OOMMessage, int, error) {
	if loc := oomEnd.FindStringIndex(window); loc != nil {
		window = window[:loc[0]]
	}
	if asyncStart.MatchString(window) {
		m, err := parseAsyncMessage(window)
		return m, len(window), err
	}
	return parseCachingMessage(window)
}

// parseCachingMessage reads the clauses of one caching-allocator message,
// which starts at "CUDA out of memory" and ends before torch's advice.
func parseCachingMessage(s string) (OOMMessage, int, error) {
	m := OOMMessage{Source: CachingAllocator, Wording: CurrentWording}
	if platformLimit.MatchString(s) {
		m.PlatformLimit = true
	}
	switch {
	case oomCachedWording.MatchString(s):
		m.Wording = CachedWording
	case oomLegacyWording.MatchString(s):
		m.Wording = LegacyWording
	case oomCapactyWording.MatchString(s):
		m.Wording = CapactyWording
	}
	if m.Wording == CachedWording || m.Wording == LegacyWording {
		// The parenthesis closes the message; what follows is the log's.
		if loc := oomCachedWording.FindStringIndex(s); loc != nil {
			s = s[:loc[1]]
		} else if loc := oomReserved.FindStringIndex(s); loc != nil {
			s = s[:loc[1]]
		}
	}
	m.Text = oneLine(s)
	p := sizeParser{}
	switch sub := oomStart.FindStringSubmatch(s); {
	case sub == nil: // bareStart's match, whose GPU clause the window may have lost
		if sub := oomRequest.FindStringSubmatch(s); sub != nil {
			m.TriedToAllocate = p.request(sub[1])
		}
	case sub[1] != "":
		m.TriedToAllocate = p.request(sub[1])
	default:
		// "more than 1EB", a wording of its own without other clauses:
		// 1 EiB is the bound it was refused at.
		m.TriedToAllocate = new(units.EiB)
		m.Text = oneLine(s[:len(sub[0])]) + " memory."
		return m, len(sub[0]), p.err
	}
	m.Device = p.integer(&m, "GPU", oomDevice, s)
	m.TotalCapacity = p.clause(&m, "total capacity", oomTotal, s)
	if strings.HasPrefix(s, "XPU") && m.Wording == LegacyWording || m.PlatformLimit {
		m.Free = p.optional(&m, "free", oomFree, s) // Intel's XPU wording has no free clause
	} else {
		m.Free = p.clause(&m, "free", oomFree, s)
	}
	m.Allocated = p.clause(&m, "allocated", oomAllocated, s)
	m.Allowed = p.optional(&m, "allowed", oomAllowed, s)
	m.PrivatePools = p.optional(&m, "private pools", oomPrivate, s)
	m.ThisProcess = p.optional(&m, "this process", oomThis, s)
	for _, sub := range oomProcess.FindAllStringSubmatch(s, -1) {
		pid, _ := strconv.Atoi(digits(sub[1])) // \d+ of a pid fits an int
		if b := p.parse(sub[2]); b != nil {
			m.Processes = append(m.Processes, ProcessMemory{PID: pid, InUse: *b})
		} else {
			m.Unavailable = append(m.Unavailable, "process "+strconv.Itoa(pid))
		}
	}
	switch m.Wording {
	case CachedWording:
		// Torch 1.0 to 1.3 printed format_size(stats.amount_cached -
		// stats.amount_allocated) as "cached" (c10/cuda/CUDACachingAllocator.cpp,
		// THCCachingAllocator::malloc): the reserve's unallocated part, not the
		// reserve. 1.4's statistics rewrite replaced it with reserved_bytes,
		// "reserved in total by PyTorch".
		m.ReservedUnallocated = p.clause(&m, "cached", oomCached, s)
		m.Reserved = sum(m.Allocated, m.ReservedUnallocated)
	case LegacyWording:
		m.Reserved = p.clause(&m, "reserved", oomReserved, s)
		if m.Reserved != nil && m.Allocated != nil {
			m.ReservedUnallocated = new(max(0, *m.Reserved-*m.Allocated)) // rounding can make it dip below
		}
	default:
		m.ReservedUnallocated = p.clause(&m, "reserved but unallocated", oomUnallocated, s)
		m.Reserved = sum(m.Allocated, m.ReservedUnallocated)
	}
	return m, len(s), p.err
}

// parseAsyncMessage reads the cudaMallocAsync backend's message. Its
// "Currently allocated" is the bytes of live allocations; the driver's pool
// keeps its cache out of sight, so no reserve is known.
func parseAsyncMessage(s string) (OOMMessage, error) {
	m := OOMMessage{Source: MallocAsync, Text: oneLine(s)}
	p := sizeParser{}
	m.Device = p.integer(&m, "device", asyncStart, s)
	m.Allocated = p.clause(&m, "currently allocated", asyncAllocated, s)
	if sub := asyncRequested.FindStringSubmatch(s); sub != nil {
		m.TriedToAllocate = p.request(sub[1])
	} else {
		m.Missing = append(m.Missing, "requested")
	}
	m.TotalCapacity = p.clause(&m, "device limit", asyncTotal, s)
	m.Free = p.clause(&m, "free", asyncFree, s)
	// Later releases print the fraction's limit, all ones when none is set.
	m.Allowed = p.optional(&m, "PyTorch limit", asyncLimit, s)
	return m, p.err
}

// parseOtherMessage keeps the rest of the line of an error raised outside
// the allocators; NCCL's calloc warning also names its size.
func parseOtherMessage(window string, source Source, library string) (OOMMessage, int) {
	line := window
	if i := strings.IndexAny(line, "\r\n"); i >= 0 {
		line = line[:i]
	}
	if i := strings.Index(line, `\n`); i >= 0 {
		line = line[:i]
	}
	if len(line) > otherMaxLen {
		line = line[:otherMaxLen]
	}
	m := OOMMessage{Source: source, Library: library, Text: oneLine(line)}
	if sub := ncclCalloc.FindStringSubmatch(line); sub != nil {
		if n, err := strconv.ParseInt(sub[1], 10, 64); err == nil {
			m.TriedToAllocate = new(units.Bytes(n))
		}
	}
	return m, len(line)
}

// oneLine undoes wraps and escaped line breaks.
func oneLine(s string) string {
	return strings.Join(strings.Fields(unescapeBreaks(s)), " ")
}

var escapedBreak = regexp.MustCompile(`\\+[nrt]`)

func unescapeBreaks(s string) string { return escapedBreak.ReplaceAllString(s, " ") }

// digits joins a number broken across lines.
func digits(s string) string { return strings.Join(strings.Fields(unescapeBreaks(s)), "") }

func sum(a, b *units.Bytes) *units.Bytes {
	if a == nil || b == nil {
		return nil
	}
	return new(*a + *b)
}

// sizeParser parses sizes captured by the clause regexps and remembers the
// first error.
type sizeParser struct{ err error }

// parse returns nil for a size of 8 EiB or more, which no memory has: the
// all-ones "not available" value through format_size.
func (p *sizeParser) parse(s string) *units.Bytes {
	f := strings.Fields(unescapeBreaks(s))
	// The unit is the last field; a number broken across lines is the rest.
	b, err := units.ParseBytes(strings.Join(f[:len(f)-1], "") + " " + f[len(f)-1])
	if errors.Is(err, units.ErrRange) {
		return nil
	}
	if err != nil && p.err == nil {
		p.err = err
	}
	return &b
}

// request parses a request, which keeps the largest size when it overflows:
// a garbage size is still a request no GPU can serve.
func (p *sizeParser) request(s string) *units.Bytes {
	if b := p.parse(s); b != nil {
		return b
	}
	return new(units.Bytes(math.MaxInt64))
}

// clause parses the size of the clause re finds in s, or notes the clause in
// m.Missing. Regexps with alternatives capture the size in one of two
// groups; the other is empty.
func (p *sizeParser) clause(m *OOMMessage, name string, re *regexp.Regexp, s string) *units.Bytes {
	b, found := p.find(m, name, re, s)
	if !found {
		m.Missing = append(m.Missing, name)
	}
	return b
}

// optional parses a clause that a message may lack without being cut.
func (p *sizeParser) optional(m *OOMMessage, name string, re *regexp.Regexp, s string) *units.Bytes {
	b, _ := p.find(m, name, re, s)
	return b
}

// find parses the clause's size, noting it in m.Unavailable when it is
// the all-ones value.
func (p *sizeParser) find(m *OOMMessage, name string, re *regexp.Regexp, s string) (*units.Bytes, bool) {
	sub := re.FindStringSubmatch(s)
	if sub == nil {
		return nil, false
	}
	for _, g := range sub[1:] {
		if g == "" {
			continue
		}
		b := p.parse(g)
		if b == nil {
			m.Unavailable = append(m.Unavailable, name)
		}
		return b, true
	}
	return nil, true
}

// integer parses the index re captures, or notes the clause as missing.
func (p *sizeParser) integer(m *OOMMessage, name string, re *regexp.Regexp, s string) *int {
	sub := re.FindStringSubmatch(s)
	if sub == nil {
		m.Missing = append(m.Missing, name)
		return nil
	}
	n, err := strconv.Atoi(digits(sub[1]))
	if err != nil {
		if p.err == nil {
			p.err = fmt.Errorf("%s index %q: %w", name, sub[1], err)
		}
		return nil
	}
	return &n
}

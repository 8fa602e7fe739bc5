// Package analyze answers "why does this job's GPU memory grow, fragment or
// run out, and which line did it" from everything a job left behind: the
// snapshots of each process at several steps, memory-log CSVs and pasted
// memory_summary() tables or OOM messages.
//
// The pipeline is
//
//  1. the caller decodes each input and hands it to an Analyzer
//     (AddSnapshot, AddMemoryLog, AddMemorySummaries, AddOOMMessages). A
//     snapshot is reduced at once to a small digest: live bytes and block
//     addresses per callsite, reservation chunks with the callsite that
//     created them, totals, trace peaks and the trace's own findings. The
//     snapshot itself can then be dropped, so a process with several
//     GB-sized snapshots needs memory for one at a time;
//  2. Report groups the inputs into processes (rank, pid and tag from the
//     file names; names without them by file stem, memory logs by name
//     prefix), orders each process's snapshots by step, dump time or trace
//     end, and compares them: callsites whose live bytes grow steadily are
//     leaks, cached bytes (reserved minus allocated) that grow steadily are
//     fragmentation, blocks that merely move are neither;
//  3. memory logs get the same verdicts from their allocated and reserved
//     series, without a callsite: a log cannot name code;
//  4. each process gets a verdict (oom, leak, fragmentation or healthy) from
//     its high and medium findings, and the report the worst of them.
//
// The Report holds rows only; cmd/vramscope prints them as text or JSON.
// Its slices are never nil.
package analyze

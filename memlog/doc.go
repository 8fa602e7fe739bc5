// Package memlog reads the text that PyTorch jobs leave behind about GPU
// memory, as opposed to the snapshot pickles the snapshot package decodes:
//
//   - memory-log CSVs in the layout of the widely copied SGLang recipe
//     (timestamp, memory_summary, memory_allocated, memory_reserved in MB),
//     read by ParseCSV into a Series;
//   - torch.cuda.memory_summary() tables pasted into a log, read by
//     ParseMemorySummaries;
//   - "CUDA out of memory" messages of every torch release, found anywhere in
//     a traceback or log and read by ParseOOMMessages.
//
// The pipeline for an unknown file is
//
//  1. Detect (or DetectReader) names the format from the bytes alone, so a
//     command can take any file without a --format flag;
//  2. the matching Parse function returns plain structs in units.Bytes;
//  3. every reader returns an error wrapping ErrUnrecognized when its input is
//     not its format, and any other error only when the input is its format
//     but unusable. Bad lines inside a CSV are not errors: they come back as
//     *SyntaxError values in Series.Warnings and reading goes on.
package memlog

package dump

// What the capture hook (vramscope record's vramscope_hook.py) shares with
// watch, in one place: the variables it reads, the files it leaves, and
// its default signal.
const (
	// EnvOut is the hook's output folder, absolute or relative to the
	// process's working directory.
	EnvOut = "VRAMSCOPE_OUT"
	// EnvSignal names the dump signal ("USR1"); "none" or "off" disables it.
	EnvSignal = "VRAMSCOPE_SIGNAL"
	// DefaultSignal is the hook's signal when EnvSignal is unset.
	DefaultSignal = "USR1"
	// controlDir, under the output folder, holds the hook's notes:
	// signal-PID (written once the handler is installed; it holds the
	// signal number) and dumps-PID.jsonl (one JSON line per dump, with the
	// path relative to the output folder and the reason, "signal" for
	// ours).
	controlDir   = ".vramscope"
	signalNote   = "signal-%d"
	dumpsNote    = "dumps-%d.jsonl"
	signalReason = "signal"
)

// EnvVars are the variables watch keeps from a process's environment.
var EnvVars = []string{EnvOut, EnvSignal}

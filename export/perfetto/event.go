package perfetto

import (
	"bytes"
	"encoding/json"
	"io"
)

// event is one Chrome trace event; only the fields this package writes.
type event struct {
	Name string `json:"name"`
	Cat  string `json:"cat,omitempty"`
	// Ph is the phase: "C" counter, "i" instant, "X" complete, "M" metadata.
	Ph string `json:"ph"`
	TS int64  `json:"ts"`
	// Dur is a complete event's duration; a pointer because 0 is valid.
	Dur *int64 `json:"dur,omitempty"`
	PID int    `json:"pid"`
	// TID 0 (omitted) is for process-level events: counters, metadata.
	TID int `json:"tid,omitempty"`
	// S is an instant's scope: "t" (thread).
	S    string `json:"s,omitempty"`
	Args any    `json:"args,omitempty"`
}

// nameArgs are the args of process_name and thread_name metadata.
type nameArgs struct {
	Name string `json:"name"`
}

// eventWriter streams a JSON object {"traceEvents": [...]} one event a
// line, so that a trace of any length is never held in memory and diffs of
// a golden file read event by event.
type eventWriter struct {
	w   io.Writer
	buf bytes.Buffer
	enc *json.Encoder
	n   int
	err error
}

func newEventWriter(w io.Writer) *eventWriter {
	ew := &eventWriter{w: w}
	ew.enc = json.NewEncoder(&ew.buf)
	// Stack frames are full of <module> and C++ templates: keep them
	// readable rather than \u003c-escaped.
	ew.enc.SetEscapeHTML(false)
	_, ew.err = io.WriteString(w, `{"displayTimeUnit":"ms","traceEvents":[`)
	return ew
}

func (ew *eventWriter) emit(e *event) {
	if ew.err != nil {
		return
	}
	ew.buf.Reset()
	sep := ",\n"
	if ew.n == 0 {
		sep = "\n"
	}
	ew.buf.WriteString(sep)
	if ew.err = ew.enc.Encode(e); ew.err != nil {
		return
	}
	// Encode ends the event with a newline; the separator supplies it.
	_, ew.err = ew.w.Write(bytes.TrimSuffix(ew.buf.Bytes(), []byte("\n")))
	ew.n++
}

func (ew *eventWriter) close() error {
	if ew.err == nil {
		_, ew.err = io.WriteString(ew.w, "\n]}\n")
	}
	return ew.err
}

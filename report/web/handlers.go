package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/vramscope/vramscope/diff"
	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/report"
	"github.com/vramscope/vramscope/report/page"
)

func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	var buf bytes.Buffer
	if err := page.WriteServed(&buf, s.title); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(buf.Bytes())
}

func (s *Server) getStatus(w http.ResponseWriter, r *http.Request) {
	s.mu.RLock()
	st := s.status
	s.mu.RUnlock()
	writeJSON(w, st)
}

func (s *Server) getReport(w http.ResponseWriter, r *http.Request) {
	p, ok := s.ready(w)
	if ok {
		writeJSON(w, p)
	}
}

// getState answers ?snapshot=ID&device=D&event=I with the allocator state
// right after event I (-1: before the first event).
func (s *Server) getState(w http.ResponseWriter, r *http.Request) {
	l, tl, i, ok := s.moment(w, r)
	if !ok {
		return
	}
	st, err := s.b.StateOf(l.Snapshot, tl, i, fmt.Sprintf("event %d", i))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	writeJSON(w, st)
}

// getFlame answers ?snapshot=ID&device=D&event=I with the flame graph of
// the blocks live right after event I.
func (s *Server) getFlame(w http.ResponseWriter, r *http.Request) {
	l, tl, i, ok := s.moment(w, r)
	if ok {
		writeJSON(w, s.b.FlameAt(l.Snapshot, tl, i))
	}
}

// getDiff answers ?base=ID&other=ID[&at=peak|end|step N][&lines=1] with
// vramscope diff's comparison of the two snapshots (diff.Report, one
// pair), at their peaks unless at says otherwise.
func (s *Server) getDiff(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.ready(w); !ok {
		return
	}
	q := r.URL.Query()
	at, err := diff.ParseMoment(q.Get("at"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	a, ok := s.side(w, r, "base")
	if !ok {
		return
	}
	b, ok := s.side(w, r, "other")
	if !ok {
		return
	}
	opts := diff.Options{At: at, Lines: q.Get("lines") == "1", Top: diffRows, Filter: s.b.Filter()}
	p, err := diff.Compare("", a, b, opts)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rep := diff.NewReport(opts)
	rep.Pairs = append(rep.Pairs, p)
	writeJSON(w, rep)
}

// diffRows is how many rows of each table the served diff shows.
const diffRows = 50

// side is the loaded snapshot named by query parameter key, as one side of
// a diff.
func (s *Server) side(w http.ResponseWriter, r *http.Request, key string) (*diff.Side, bool) {
	v, ok := s.view(w, r, key)
	if !ok {
		return nil, false
	}
	s.mu.RLock()
	l, ok := s.loaded[v.ID]
	s.mu.RUnlock()
	if !ok {
		http.Error(w, fmt.Sprintf("%s=%d: the snapshot was not kept loaded", key, v.ID), http.StatusBadRequest)
		return nil, false
	}
	side := &diff.Side{Path: v.Input, Snapshot: l.Snapshot, Timelines: l.Timelines, TorchVersion: diff.TorchVersion(v.Input)}
	if id := inputs.ParseIdentity(v.Input); id.HasStep {
		side.FileStep = &id.Step
	}
	return side, true
}

// ready returns the payload, or answers 503 while the inputs load.
func (s *Server) ready(w http.ResponseWriter) (*report.Payload, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.payload == nil {
		http.Error(w, "still loading: "+s.status.State, http.StatusServiceUnavailable)
		return nil, false
	}
	return s.payload, true
}

// view looks up the snapshot view named by query parameter key.
func (s *Server) view(w http.ResponseWriter, r *http.Request, key string) (*report.SnapshotView, bool) {
	id, err := strconv.Atoi(r.URL.Query().Get(key))
	s.mu.RLock()
	v := s.views[id]
	s.mu.RUnlock()
	if err != nil || v == nil {
		http.Error(w, fmt.Sprintf("%s=%q: no such snapshot", key, r.URL.Query().Get(key)), http.StatusBadRequest)
		return nil, false
	}
	return v, true
}

// moment parses snapshot, device and event and checks them against the
// loaded inputs.
func (s *Server) moment(w http.ResponseWriter, r *http.Request) (Loaded, *replay.Timeline, int, bool) {
	if _, ok := s.ready(w); !ok {
		return Loaded{}, nil, 0, false
	}
	q := r.URL.Query()
	id, err1 := strconv.Atoi(q.Get("snapshot"))
	dev, err2 := strconv.Atoi(q.Get("device"))
	i, err3 := strconv.Atoi(q.Get("event"))
	if err1 != nil || err2 != nil || err3 != nil {
		http.Error(w, "want integer snapshot, device and event parameters", http.StatusBadRequest)
		return Loaded{}, nil, 0, false
	}
	s.mu.RLock()
	l, ok := s.loaded[id]
	s.mu.RUnlock()
	if !ok {
		http.Error(w, fmt.Sprintf("snapshot %d: no such snapshot", id), http.StatusBadRequest)
		return Loaded{}, nil, 0, false
	}
	for _, tl := range l.Timelines {
		if tl.Device != dev {
			continue
		}
		if i < replay.BeforeRecording || i >= tl.Len() {
			http.Error(w, fmt.Sprintf("event %d outside the trace's %d events", i, tl.Len()), http.StatusBadRequest)
			return Loaded{}, nil, 0, false
		}
		return l, tl, i, true
	}
	http.Error(w, fmt.Sprintf("snapshot %d has no device %d", id, dev), http.StatusBadRequest)
	return Loaded{}, nil, 0, false
}

func writeJSON(w http.ResponseWriter, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(data)
}

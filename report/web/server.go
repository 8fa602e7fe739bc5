// Package web serves the report's page and its payload over HTTP: the
// payload that the static report embeds, plus the pieces the static file
// cannot hold (the allocator state and flame graph at any event, the diff
// of any two snapshots), computed on demand by the same report.Builder.
package web

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/report"
	"github.com/vramscope/vramscope/snapshot"
)

// Loaded is one snapshot kept for on-demand views.
type Loaded struct {
	Snapshot  *snapshot.Snapshot
	Timelines []*replay.Timeline
}

// Status is the progress of the load, as /api/status reports it.
type Status struct {
	// State is "loading", "ready" or "failed".
	State   string `json:"state"`
	Done    int    `json:"done"`
	Total   int    `json:"total"`
	Current string `json:"current"`
	Error   string `json:"error"`
}

// Server holds the loaded inputs. It answers while they load: the page
// shows the progress, and the API answers 503 until Ready.
type Server struct {
	title string
	b     *report.Builder

	mu      sync.RWMutex
	status  Status
	payload *report.Payload
	views   map[int]*report.SnapshotView
	loaded  map[int]Loaded
}

// New returns a Server that is loading total inputs.
func New(title string, total int) *Server {
	return &Server{title: title, status: Status{State: "loading", Total: total}}
}

// Progress records that done inputs are loaded, the last being current.
func (s *Server) Progress(done int, current string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status.Done, s.status.Current = done, current
}

// Ready publishes the payload; b is the Builder that made it, which
// builds the on-demand views, and loaded holds the snapshots by input
// path.
func (s *Server) Ready(p *report.Payload, b *report.Builder, loaded map[string]Loaded) {
	views := map[int]*report.SnapshotView{}
	byID := map[int]Loaded{}
	for k := range p.Processes {
		for i := range p.Processes[k].Snapshots {
			v := &p.Processes[k].Snapshots[i]
			views[v.ID] = v
			if l, ok := loaded[v.Input]; ok {
				byID[v.ID] = l
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.payload, s.b, s.views, s.loaded = p, b, views, byID
	s.status.State, s.status.Current = "ready", ""
	s.status.Done = max(s.status.Done, s.status.Total)
}

// Fail records why the load stopped.
func (s *Server) Fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status.State, s.status.Error = "failed", err.Error()
}

// Static are the paths another site's page may link to (serve passes them
// to localhttp.Guard): the page, which holds no data of its own; the API
// answers the page alone.
var Static = []string{"/"}

// Handler routes the page and the API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.page)
	mux.HandleFunc("GET /api/status", s.getStatus)
	mux.HandleFunc("GET /api/report", s.getReport)
	mux.HandleFunc("GET /api/state", s.getState)
	mux.HandleFunc("GET /api/flame", s.getFlame)
	mux.HandleFunc("GET /api/diff", s.getDiff)
	return recoverer(mux)
}

// recoverer turns a panic in a handler into a 500, so that one bad
// request never takes the session down with the loaded inputs.
func recoverer(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				http.Error(w, fmt.Sprintf("internal error: %v", v), http.StatusInternalServerError)
			}
		}()
		h.ServeHTTP(w, r)
	})
}

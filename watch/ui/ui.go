// Package ui serves watch's live page: the node's GPUs and processes,
// each process's memory curve, its verdict, and for a captured leak the
// finding, its line and a link to the analyzed snapshot in vramscope's
// report view. Everything is embedded; the page fetches nothing from
// elsewhere.
package ui

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/vramscope/vramscope/watch/agent"
)

//go:embed static
var static embed.FS

// Options configure the page.
type Options struct {
	Hostname string
	// Report writes vramscope's HTML report of snapshot files (the
	// report command's page); nil hides the links.
	Report func(ctx context.Context, w io.Writer, title string, paths []string) error
}

// Static are the paths another site may link to: the page, which holds
// no data of its own.
var Static = []string{"/"}

// Handler serves the page at /, its data at /api/state and /api/series,
// a capture at POST /api/dump?pid=N, and a captured process's report at
// /report?key=KEY. Serve it behind localhttp.Guard with Static as the
// static paths: only the page's own button may make a node's processes
// dump, never another site's page in the same browser.
func Handler(a *agent.Agent, opts Options) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		b, _ := static.ReadFile("static/index.html")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(b)
	})
	mux.HandleFunc("GET /api/state", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, stateOf(a.State(), opts))
	})
	mux.HandleFunc("GET /api/series", func(w http.ResponseWriter, r *http.Request) {
		key := r.URL.Query().Get("key")
		minutes, _ := strconv.Atoi(r.URL.Query().Get("minutes"))
		s, err := seriesOf(a, key, time.Duration(minutes)*time.Minute)
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		writeJSON(w, s)
	})
	mux.HandleFunc("POST /api/dump", func(w http.ResponseWriter, r *http.Request) {
		pid, err := strconv.Atoi(r.URL.Query().Get("pid"))
		if err != nil {
			http.Error(w, "pid: want a number", http.StatusBadRequest)
			return
		}
		res, err := a.CaptureNow(r.Context(), pid)
		if err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		writeJSON(w, res)
	})
	if opts.Report != nil {
		mux.HandleFunc("GET /report", func(w http.ResponseWriter, r *http.Request) {
			key := r.URL.Query().Get("key")
			for _, p := range a.State().Processes {
				if p.Key != key || p.Capture == nil {
					continue
				}
				w.Header().Set("Content-Type", "text/html; charset=utf-8")
				title := fmt.Sprintf("vramscope: pid %d (%s) on gpu %d", p.PID, p.Command, p.GPU)
				if err := opts.Report(r.Context(), w, title, p.Capture.Inputs); err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
				}
				return
			}
			http.Error(w, "no capture for "+key, http.StatusNotFound)
		})
	}
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(v)
}

// state is what /api/state sends.
type state struct {
	Hostname  string          `json:"hostname"`
	Time      time.Time       `json:"time"`
	Up        bool            `json:"up"`
	Driver    string          `json:"driver"`
	Devices   []device        `json:"devices"`
	Processes []agent.Process `json:"processes"`
	Reports   bool            `json:"reports"`
}

type device struct {
	Index int    `json:"index"`
	UUID  string `json:"uuid"`
	Name  string `json:"name"`
	Up    bool   `json:"up"`
	Err   string `json:"error,omitempty"`
	Total uint64 `json:"total_bytes"`
	Used  uint64 `json:"used_bytes"`
}

func stateOf(st agent.State, opts Options) state {
	out := state{Hostname: opts.Hostname, Time: st.Time, Up: st.Up, Driver: st.Driver, Processes: st.Processes, Reports: opts.Report != nil}
	for _, d := range st.Devices {
		out.Devices = append(out.Devices, device{d.Index, d.UUID, d.Name, d.Up, d.Err, d.Memory.Total, d.Memory.Used})
	}
	if out.Processes == nil {
		out.Processes = []agent.Process{}
	}
	return out
}

// series is a curve: unix milliseconds and bytes (the minute's maximum
// for history older than the raw retention).
type series struct {
	Key    string  `json:"key"`
	Times  []int64 `json:"t"`
	Values []int64 `json:"v"`
}

// seriesOf is the last span of key's curve from the history, or the
// verdict window when the agent keeps no history.
func seriesOf(a *agent.Agent, key string, span time.Duration) (series, error) {
	s := series{Key: key}
	if store := a.Store(); store != nil && span > 0 {
		now := time.Now()
		ps, err := store.Range("p/"+key, now.Add(-span), now)
		if err != nil {
			return s, err
		}
		for _, p := range ps {
			s.Times = append(s.Times, p.T.UnixMilli())
			s.Values = append(s.Values, p.Max)
		}
		return s, nil
	}
	t, v, ok := a.Recent(key)
	if !ok {
		return s, fmt.Errorf("%s: not a live process", key)
	}
	s.Times, s.Values = t, v
	return s, nil
}

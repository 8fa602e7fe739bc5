// Package follow is watch's view of a serving engine's log (watch
// --follow LOG): it reads the log as the engine writes it, as tail -F
// does (across rotation and truncation, or from standard input), and
// judges its pools with package pools' verdict, the one analyze gives, so
// that /metrics and the API say live what analyze says after the fact.
package follow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/vramscope/vramscope/pools"
)

// Options are how often the log is looked at and judged.
type Options struct {
	// Poll is the time between reads of a file that had nothing new.
	Poll time.Duration
	// Judge is the least time between two verdicts: a busy engine writes
	// lines faster than they need judging.
	Judge time.Duration
	// Log receives one line per event worth an operator's eye (a pool
	// turning into a leak, a rotation); nil discards them.
	Log io.Writer
	// Stdin is what the path "-" reads; nil: os.Stdin.
	Stdin io.Reader
}

// DefaultOptions poll every second and judge at most every 10 seconds.
var DefaultOptions = Options{Poll: time.Second, Judge: 10 * time.Second}

// Stdin is the path that names standard input.
const Stdin = "-"

// Pool is one rank's pool as the log shows it now.
type Pool struct {
	Pool   string `json:"pool"`
	Engine string `json:"engine"`
	Rank   string `json:"rank"`
	Unit   string `json:"unit"`
	// Capacity is the pool's size, 0 when the log has not said.
	Capacity int64 `json:"capacity"`
	// Used is the last stats line's; Floor the latest floor at
	// FloorRunning requests (pools.Floors), -1 before there is one.
	Used         int64 `json:"used"`
	Floor        int64 `json:"floor"`
	FloorRunning int   `json:"floor_running_requests"`
	// Leak is set when the verdict finds the pool leaking; Leaked is
	// then its estimate (exact from an idle check) and Finding the
	// verdict's words.
	Leak   bool   `json:"leak_suspected"`
	Leaked int64  `json:"leaked"`
	Onset  string `json:"onset,omitempty"`
	Causes string `json:"causes,omitempty"`
}

// State is what the follower knows now.
type State struct {
	Path string    `json:"path"`
	Time time.Time `json:"time"`
	// Lines counts the lines read, Unparsed those that looked like pool
	// stats and could not be read.
	Lines    int    `json:"lines"`
	Unparsed int    `json:"unparsed"`
	Pools    []Pool `json:"pools"`
	// Err is why the log cannot be read now ("" when it can).
	Err string `json:"error,omitempty"`
}

// Follower follows one log.
type Follower struct {
	path string
	opts Options

	mu     sync.Mutex
	state  State
	stream *pools.Stream
	leaks  map[string]bool // pool/rank: for the log's news
}

// New follows path ("-": standard input).
func New(path string, opts Options) *Follower {
	return &Follower{path: path, opts: opts, state: State{Path: path, Pools: []Pool{}}, stream: pools.NewStream(), leaks: map[string]bool{}}
}

// State returns a copy of what the follower knows.
func (f *Follower) State() State {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.state
	st.Pools = append([]Pool(nil), st.Pools...)
	return st
}

// Run reads the log until ctx ends (or standard input does), judging it
// as it grows.
func (f *Follower) Run(ctx context.Context) error {
	var judged time.Time
	fresh := false
	judge := func(force bool) {
		if fresh && (force || time.Since(judged) >= f.opts.Judge) {
			f.judge()
			judged, fresh = time.Now(), false
		}
	}
	feed := func(p []byte) {
		f.stream.Write(p)
		fresh = true
	}
	if f.path == Stdin {
		in := f.opts.Stdin
		if in == nil {
			in = os.Stdin
		}
		err := readStdin(ctx, in, feed, judge, f.opts.Poll)
		judge(true)
		return err
	}
	t := tail{path: f.path, log: f.logf}
	defer t.close()
	tick := time.NewTicker(f.opts.Poll)
	defer tick.Stop()
	for {
		if err := t.read(feed); err != nil {
			f.setErr(err)
		} else {
			f.setErr(nil)
		}
		judge(false)
		select {
		case <-ctx.Done():
			judge(true)
			return nil
		case <-tick.C:
		}
	}
}

// readStdin feeds standard input as it comes, judging between reads.
func readStdin(ctx context.Context, r io.Reader, feed func([]byte), judge func(bool), poll time.Duration) error {
	type chunk struct {
		b   []byte
		err error
	}
	ch := make(chan chunk)
	go func() {
		for {
			buf := make([]byte, 64<<10)
			n, err := r.Read(buf)
			ch <- chunk{buf[:n], err}
			if err != nil {
				return
			}
		}
	}()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case c := <-ch:
			feed(c.b)
			if errors.Is(c.err, io.EOF) {
				return nil
			}
			if c.err != nil {
				return fmt.Errorf("standard input: %w", c.err)
			}
		case <-tick.C:
			judge(false)
		}
	}
}

func (f *Follower) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		f.state.Err = ""
		return
	}
	f.state.Err = err.Error()
}

func (f *Follower) logf(format string, args ...any) {
	if f.opts.Log != nil {
		fmt.Fprintf(f.opts.Log, "vramscope: %s: "+format+"\n", append([]any{f.path}, args...)...)
	}
}

// judge runs the pools verdict over the log so far.
func (f *Follower) judge() {
	l := f.stream.Log()
	leaks, _ := pools.Judge(l)
	st := State{Path: f.path, Time: time.Now(), Lines: l.Lines, Unparsed: l.Unparsed, Pools: []Pool{}}
	pool := "token_to_kv_pool"
	if l.Engine == pools.VLLM {
		pool = "kv_cache"
	}
	for _, sr := range l.Series {
		fl := pools.Floors(sr.Samples)
		p := Pool{Pool: pool, Engine: string(l.Engine), Rank: sr.Rank, Unit: l.Unit(), Capacity: l.Capacity,
			Used: sr.Samples[len(sr.Samples)-1].Used, Floor: -1, FloorRunning: fl.Level}
		if n := len(fl.Points); n > 0 {
			p.Floor = fl.Points[n-1].Used
		}
		st.Pools = append(st.Pools, p)
	}
	for _, lk := range leaks {
		i := -1
		for j, p := range st.Pools {
			if p.Pool == lk.Pool && p.Rank == lk.Rank {
				i = j
			}
		}
		if i < 0 { // an idle check's pool, or one no stats line names
			st.Pools = append(st.Pools, Pool{Pool: lk.Pool, Engine: string(lk.Engine), Rank: lk.Rank, Unit: lk.Unit,
				Capacity: lk.Capacity, Used: -1, Floor: -1})
			i = len(st.Pools) - 1
		}
		p := &st.Pools[i]
		p.Leak, p.Leaked, p.Causes = true, lk.Leaked, lk.Causes()
		if l.HasTime {
			p.Onset = lk.OnsetTime.Format(l.Layout)
		}
		if key := p.Pool + "/" + p.Rank; !f.leaks[key] {
			f.leaks[key] = true
			f.logf("pool %s %s leaks: %d of %d %s held by no request", p.Pool, p.Rank, p.Leaked, p.Capacity, p.Unit)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	st.Err = f.state.Err
	f.state = st
}

// ServeHTTP answers the follower's state as JSON (watch's /api/pools).
func (f *Follower) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(f.State())
}

package history

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

const MiB = 1 << 20

var t0 = time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)

func open(t *testing.T, path string, opts Options) *Store {
	t.Helper()
	s, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// leakAt is a series that grows 2 MiB every 30 s with a 1 s wobble.
func leakAt(i int) int64 { return 4096*MiB + int64(i/30)*2*MiB + int64(i%2)*4096 }

func TestRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	s := open(t, path, DefaultOptions)
	s.SetMeta("p/GPU-0/100/5", []byte(`{"pid":100}`))
	for i := range 600 {
		if err := s.Add("p/GPU-0/100/5", t0.Add(time.Duration(i)*time.Second), leakAt(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path, DefaultOptions)
	defer s.Close()
	ps, err := s.Range("p/GPU-0/100/5", t0, t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 600 {
		t.Fatalf("%d points after a restart, want 600", len(ps))
	}
	for i, p := range ps {
		if !p.T.Equal(t0.Add(time.Duration(i)*time.Second)) || p.Last != leakAt(i) {
			t.Fatalf("point %d: %+v, want %v at %v", i, p, leakAt(i), t0.Add(time.Duration(i)*time.Second))
		}
	}
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || string(list[0].Meta) != `{"pid":100}` || !list[0].First.Equal(t0) || !list[0].End.Equal(t0.Add(599*time.Second)) {
		t.Errorf("list %+v", list)
	}
}

func TestInUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.db")
	s := open(t, path, DefaultOptions)
	defer s.Close()
	if _, err := Open(path, DefaultOptions); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second open: %v, want in use", err)
	}
}

// Compaction rolls old raw samples into minutes (min, max, last) and
// drops what is past the retention, series and all.
func TestCompact(t *testing.T) {
	opts := Options{Raw: time.Hour, Retention: 6 * time.Hour, FlushEvery: time.Minute}
	s := open(t, filepath.Join(t.TempDir(), "history.db"), opts)
	defer s.Close()
	for i := range 3 * 3600 {
		ts := t0.Add(time.Duration(i) * time.Second)
		s.Add("a", ts, leakAt(i))
		if i < 600 {
			s.Add("ended", ts, 1)
		}
	}
	end := t0.Add(3 * time.Hour)
	if err := s.Compact(end); err != nil {
		t.Fatal(err)
	}
	ps, err := s.Range("a", t0, end)
	if err != nil {
		t.Fatal(err)
	}
	// Two hours of minutes, then the last hour raw (its first chunk
	// straddles the cut and stays raw).
	var minutes, raw int
	for _, p := range ps {
		if p.T.Before(end.Add(-opts.Raw - time.Minute)) {
			minutes++
			i := int(p.T.Sub(t0) / time.Second)
			if p.Min != leakAt(i) || p.Max != leakAt(i+59)+4096-int64((i+59)%2)*4096 || p.Last != leakAt(i+59) {
				t.Fatalf("minute at %v: %+v", p.T, p)
			}
		} else {
			raw++
		}
	}
	if minutes < 119 || minutes > 121 || raw < 3600 || raw > 3660 {
		t.Errorf("%d minutes and %d raw samples, want 2 h of minutes and 1 h raw", minutes, raw)
	}
	// Later, everything of "ended" is past the retention.
	if err := s.Compact(t0.Add(8 * time.Hour)); err != nil {
		t.Fatal(err)
	}
	list, _ := s.List()
	if len(list) != 1 || list[0].ID != "a" {
		t.Errorf("after the retention: %+v, want only a", list)
	}
}

// TestSize measures what 3 hours of 1 Hz samples of 30 processes cost on
// disk, the last hour raw and the rest rolled up.
func TestSize(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: writes 3 hours of samples of 30 processes to measure the store on disk; the full go test ./... (.ci/run) runs it")
	}
	opts := Options{Raw: time.Hour, Retention: 30 * 24 * time.Hour, FlushEvery: 30 * time.Second}
	s := open(t, filepath.Join(t.TempDir(), "history.db"), opts)
	defer s.Close()
	const procs, hours = 30, 3
	for i := range hours * 3600 {
		ts := t0.Add(time.Duration(i) * time.Second)
		for p := range procs {
			s.Add(fmt.Sprintf("p/GPU-%d/%d/1", p%8, 1000+p), ts, leakAt(i+p))
		}
		if i%3600 == 3599 {
			if err := s.Compact(ts); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.Flush()
	size, _ := s.Size()
	// 2 of the 3 hours are rolled up; the file never shrinks (bbolt reuses
	// freed pages), so this is an upper bound.
	t.Logf("%d processes, %d h at 1 Hz, 1 h raw: %.1f MiB on disk (%.1f B a sample)", procs, hours, float64(size)/MiB, float64(size)/float64(procs*hours*3600))
	if perSample := float64(size) / float64(procs*hours*3600); perSample > 16 {
		t.Errorf("%.1f bytes a sample, want at most 16", perSample)
	}
}

// TestKill9 writes from a child process that is killed with SIGKILL in
// the middle of its writes: the file opens again and holds every sample
// the child had flushed.
func TestKill9(t *testing.T) {
	if dir := os.Getenv("HISTORY_KILL_CHILD"); dir != "" {
		child(dir)
		return
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKill9$")
	cmd.Env = append(os.Environ(), "HISTORY_KILL_CHILD="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan int)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if n, ok := strings.CutPrefix(sc.Text(), "flushed "); ok {
				v, _ := strconv.Atoi(n)
				lines <- v
			}
		}
	}()
	flushed := 0
	deadline := time.After(30 * time.Second)
wait:
	for flushed < 2000 {
		select {
		case n, ok := <-lines:
			if !ok {
				break wait
			}
			flushed = n
		case <-deadline:
			break wait
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if flushed < 2000 {
		t.Fatalf("child flushed only %d samples in 30 s", flushed)
	}
	s := open(t, filepath.Join(dir, "history.db"), DefaultOptions)
	defer s.Close()
	ps, err := s.Range("p", t0, t0.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) < flushed {
		t.Fatalf("%d samples after the kill, the child had flushed %d", len(ps), flushed)
	}
	for i, p := range ps {
		if p.Last != int64(i) {
			t.Fatalf("sample %d holds %d", i, p.Last)
		}
	}
	t.Logf("killed after %d flushed samples; %d there on reopening", flushed, len(ps))
}

// child writes samples without end, flushing every 10 and saying so.
func child(dir string) {
	s, err := Open(filepath.Join(dir, "history.db"), Options{Raw: time.Hour, Retention: time.Hour, FlushEvery: time.Hour})
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	for i := 0; ; i++ {
		s.Add("p", t0.Add(time.Duration(i)*time.Second), int64(i))
		if i%10 == 9 {
			if err := s.Flush(); err != nil {
				fmt.Println(err)
				os.Exit(1)
			}
			fmt.Printf("flushed %d\n", i+1)
		}
	}
}

// TestRollupSize measures a week of per-minute rollups of 30 processes,
// what the history holds past the raw retention.
func TestRollupSize(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "history.db"), DefaultOptions)
	defer s.Close()
	const procs, days = 30, 7
	err := s.db.Update(func(tx *bolt.Tx) error {
		root := tx.Bucket(seriesBucket)
		for p := range procs {
			b, err := root.CreateBucket([]byte(fmt.Sprintf("p/GPU-%d/%d/1", p%8, 1000+p)))
			if err != nil {
				return err
			}
			roll, err := b.CreateBucket(rollBucket)
			if err != nil {
				return err
			}
			var ps []Point
			for m := range days * 24 * 60 {
				v := leakAt(m * 60)
				ps = append(ps, Point{T: t0.Add(time.Duration(m) * time.Minute), Min: v, Max: v + 4096, Last: v})
			}
			if err := appendRoll(roll, ps); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	size, _ := s.Size()
	t.Logf("%d processes, %d days of minutes: %.1f MiB (%.1f B a minute)", procs, days, float64(size)/MiB, float64(size)/float64(procs*days*24*60))
	if perMinute := float64(size) / float64(procs*days*24*60); perMinute > 24 {
		t.Errorf("%.1f bytes a minute, want at most 24", perMinute)
	}
	ps, err := s.Range("p/GPU-0/1000/1", t0.Add(24*time.Hour), t0.Add(25*time.Hour-time.Minute))
	if err != nil || len(ps) != 60 || ps[0].Max != leakAt(24*3600)+4096 {
		t.Errorf("an hour of minutes a day in: %d points, %v", len(ps), err)
	}
}

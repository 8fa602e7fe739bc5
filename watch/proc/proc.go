// Package proc names a process from /proc: its command, command line,
// user, cgroup (container and Kubernetes pod) and torch rank.
//
// It reads a process's environment only for the few variables it is asked
// to keep (RANK, LOCAL_RANK and the capture hook's); no other value leaves
// this package, so secrets in a job's environment stay where they are.
package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// RankVars are the environment variables torch's launchers (torchrun,
// torch.distributed.launch, accelerate, deepspeed) set for each rank.
var RankVars = []string{"RANK", "LOCAL_RANK"}

// Identity names one process. PID and StartTicks together name it for
// good: a pid that is reused belongs to a process with another start.
type Identity struct {
	PID int `json:"pid"`
	// StartTicks is the process's start time in clock ticks since boot
	// (field 22 of /proc/PID/stat).
	StartTicks uint64 `json:"start_ticks"`
	Command    string `json:"command"` // comm: "python3"
	// Cmdline is the executable as started (argv[0]), with its arguments
	// only when the Reader was asked for them.
	Cmdline   string `json:"cmdline"`
	User      string `json:"user"`
	Cgroup    string `json:"cgroup,omitempty"`
	Container string `json:"container,omitempty"` // the first 12 hex digits of the container id
	Pod       string `json:"pod,omitempty"`       // the Kubernetes pod's UID
	Rank      *int   `json:"rank,omitempty"`
	LocalRank *int   `json:"local_rank,omitempty"`
	// Env holds the kept variables that are set (the hook's); never
	// serialized.
	Env map[string]string `json:"-"`
}

// Reader reads identities under a proc file system.
type Reader struct {
	// Root is the proc mount: /proc, or /host/proc in a container that
	// sees the host's.
	Root string
	// Args keeps the command line's arguments (they may hold paths,
	// tokens or customer data; off by default).
	Args bool
	// Keep names the environment variables, besides RankVars, whose
	// values Identity.Env carries.
	Keep []string

	mu    sync.Mutex
	users map[string]string
	// stats holds each watched pid's stat file open: the sampler reads it
	// every second, and one pread costs a fraction of an open, read and
	// close. An open stat file keeps naming its own process: once that
	// process is gone (and its pid maybe reused) reads fail with ESRCH.
	stats map[int]*os.File
}

// ErrGone is returned for a process that no longer exists.
var ErrGone = errors.New("process is gone")

func (r *Reader) path(pid int, name string) string {
	return filepath.Join(r.Root, strconv.Itoa(pid), name)
}

// StartTicks reads only the start time of pid: what the sampler needs
// every second to tell a known process from a new one with a reused pid.
func (r *Reader) StartTicks(pid int) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var buf [1024]byte
	if f := r.stats[pid]; f != nil {
		if n, err := f.ReadAt(buf[:], 0); n > 0 && (err == nil || errors.Is(err, io.EOF)) {
			return parseStart(buf[:n])
		}
		// The process it named is gone; the pid may hold another.
		f.Close()
		delete(r.stats, pid)
	}
	f, err := os.Open(r.path(pid, "stat"))
	if err != nil {
		return 0, gone(pid, err)
	}
	n, err := f.ReadAt(buf[:], 0)
	if n == 0 && err != nil {
		f.Close()
		return 0, gone(pid, err)
	}
	if r.stats == nil {
		r.stats = map[int]*os.File{}
	}
	r.stats[pid] = f
	return parseStart(buf[:n])
}

// Forget closes what the reader keeps open for pid, once it is no longer
// watched.
func (r *Reader) Forget(pid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f := r.stats[pid]; f != nil {
		f.Close()
		delete(r.stats, pid)
	}
}

func gone(pid int, err error) error {
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, errESRCH) {
		return fmt.Errorf("pid %d: %w", pid, ErrGone)
	}
	return fmt.Errorf("pid %d: %w", pid, err)
}

// parseStart reads field 22 of a stat line. The command (field 2) is in
// parentheses and may hold spaces and parentheses itself, so fields are
// counted after its last ')'.
func parseStart(stat []byte) (uint64, error) {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, errors.New("stat: no command field")
	}
	fields := strings.Fields(string(stat[end+1:]))
	// fields[0] is field 3 (state); field 22 is fields[19].
	if len(fields) < 20 {
		return 0, fmt.Errorf("stat: %d fields after the command, want at least 20", len(fields))
	}
	v, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stat: start time: %w", err)
	}
	return v, nil
}

// Read names pid. Missing details (a cgroup file it may not read, an
// environment of another user's process) are left empty, not errors: the
// process is still worth watching.
func (r *Reader) Read(pid int) (Identity, error) {
	id := Identity{PID: pid}
	start, err := r.StartTicks(pid)
	if err != nil {
		return id, err
	}
	id.StartTicks = start
	if b, err := os.ReadFile(r.path(pid, "comm")); err == nil {
		id.Command = strings.TrimSpace(string(b))
	}
	var argv []string
	if b, err := os.ReadFile(r.path(pid, "cmdline")); err == nil {
		argv = strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if r.Args {
			id.Cmdline = strings.Join(argv, " ")
		} else if len(argv) > 0 {
			id.Cmdline = argv[0]
		}
	}
	if b, err := os.ReadFile(r.path(pid, "status")); err == nil {
		id.User = r.user(uidOf(b))
	}
	if b, err := os.ReadFile(r.path(pid, "cgroup")); err == nil {
		id.Cgroup = cgroupPath(b)
		id.Container, id.Pod = containerOf(id.Cgroup)
	}
	if b, err := os.ReadFile(r.path(pid, "environ")); err == nil {
		id.Env = environ(b, append(r.Keep, RankVars...))
	}
	id.Rank = rankOf(id.Env["RANK"], argv, "--rank", "--node_rank")
	id.LocalRank = rankOf(id.Env["LOCAL_RANK"], argv, "--local-rank", "--local_rank")
	for _, v := range RankVars {
		delete(id.Env, v)
	}
	return id, nil
}

// uidOf is the real uid on the status file's "Uid:" line.
func uidOf(status []byte) string {
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return f[0]
			}
		}
	}
	return ""
}

// user is the name of uid, cached, or the number when this machine (or
// container) has no name for it.
func (r *Reader) user(uid string) string {
	if uid == "" {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if name, ok := r.users[uid]; ok {
		return name
	}
	name := uid
	if u, err := user.LookupId(uid); err == nil {
		name = u.Username
	}
	if r.users == nil {
		r.users = map[string]string{}
	}
	r.users[uid] = name
	return name
}

// cgroupPath is the process's cgroup v2 path ("0::/..."), or under v1 the
// memory controller's, or the first line's.
func cgroupPath(b []byte) string {
	var first, memory string
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			return parts[2]
		}
		if first == "" {
			first = parts[2]
		}
		if memory == "" && strings.Contains(","+parts[1]+",", ",memory,") {
			memory = parts[2]
		}
	}
	if memory != "" {
		return memory
	}
	return first
}

var (
	// containerID matches the 64-hex id that docker, containerd and CRI-O
	// put in a container's cgroup ("docker-<id>.scope",
	// "cri-containerd-<id>.scope", "crio-<id>", "/docker/<id>").
	containerID = regexp.MustCompile(`(?:^|[/\-:])([0-9a-f]{64})(?:\.scope)?(?:/|$)`)
	// podUID matches kubelet's pod slice, with the systemd driver's
	// underscores ("kubepods-burstable-pod1d2c..._..slice") or the
	// cgroupfs driver's dashes ("/kubepods/burstable/pod1d2c-...").
	podUID = regexp.MustCompile(`pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})`)
)

// containerOf reads the container id (short form) and pod UID out of a
// cgroup path.
func containerOf(cgroup string) (container, pod string) {
	if m := containerID.FindAllStringSubmatch(cgroup, -1); len(m) > 0 {
		container = m[len(m)-1][1][:12]
	}
	if m := podUID.FindStringSubmatch(cgroup); m != nil {
		pod = strings.ReplaceAll(m[1], "_", "-")
	}
	return container, pod
}

// environ keeps the named variables of a NUL-separated environment.
func environ(b []byte, keep []string) map[string]string {
	env := map[string]string{}
	for kv := range bytes.SplitSeq(b, []byte{0}) {
		k, v, ok := bytes.Cut(kv, []byte{'='})
		if !ok {
			continue
		}
		for _, name := range keep {
			if string(k) == name {
				env[name] = string(v)
			}
		}
	}
	return env
}

// rankOf is the rank in the environment's value, else in one of the
// command line's flags ("--local-rank=3", "--rank 1"); nil when neither
// says.
func rankOf(env string, argv []string, flags ...string) *int {
	if n, err := strconv.Atoi(strings.TrimSpace(env)); err == nil && n >= 0 {
		return &n
	}
	for i, a := range argv {
		for _, f := range flags {
			v, ok := strings.CutPrefix(a, f+"=")
			if !ok && a == f && i+1 < len(argv) {
				v, ok = argv[i+1], true
			}
			if !ok {
				continue
			}
			if n, err := strconv.Atoi(v); err == nil && n >= 0 {
				return &n
			}
		}
	}
	return nil
}

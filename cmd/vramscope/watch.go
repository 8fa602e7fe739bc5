package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"github.com/vramscope/vramscope/analyze"
	"github.com/vramscope/vramscope/internal/localhttp"
	"github.com/vramscope/vramscope/internal/trend"
	"github.com/vramscope/vramscope/internal/units"
	"github.com/vramscope/vramscope/report/page"
	"github.com/vramscope/vramscope/watch/agent"
	"github.com/vramscope/vramscope/watch/dump"
	"github.com/vramscope/vramscope/watch/follow"
	"github.com/vramscope/vramscope/watch/gpu"
	"github.com/vramscope/vramscope/watch/history"
	"github.com/vramscope/vramscope/watch/metrics"
	"github.com/vramscope/vramscope/watch/proc"
	"github.com/vramscope/vramscope/watch/ui"
	"github.com/vramscope/vramscope/watch/verdict"
)

// watchFlags are watch's options.
type watchFlags struct {
	interval       time.Duration
	listen         string
	allowHosts     []string
	data           string
	keepRaw        time.Duration
	retention      time.Duration
	window         time.Duration
	minRate        bytesFlag
	steadiness     float64
	capture        bool
	captureEvery   time.Duration
	captureTimeout time.Duration
	procRoot       string
	args           bool
	hostname       string
	ui             bool
	dump           int
	json           bool
	follow         string
}

func newWatchCommand(stdout, stderr io.Writer) *cobra.Command {
	fl := watchFlags{minRate: bytesFlag{Bytes: units.Bytes(verdict.DefaultConfig.MinRate), set: true}}
	cmd := &cobra.Command{
		Use:   "watch [flags]",
		Short: "Watch this node's GPU processes: per-process memory, leak verdicts while they run, Prometheus metrics",
		Long: `Watch samples every GPU of this node through NVML (--interval, default every
second): each device's used and free memory and each process's, named by pid,
command, user, container, pod and torch rank (RANK, LOCAL_RANK). Over a
sliding window (--window) it fits each process's memory with the statistics
analyze uses between snapshots and calls it a leak when it grows steadily
(at least --min-rate a minute, Kendall tau of at least --steadiness) and is
still growing; a jump followed by a plateau is a warm-up, a flat or
saw-toothed series is steady.

Metrics are served on --listen at /metrics (dcgm-exporter's
DCGM_FI_DEV_FB_USED and DCGM_FI_DEV_FB_FREE, and vramscope_process_*), the
samples kept under --data across restarts. When a process that runs under
vramscope's capture hook (vramscope record) turns into a leak, watch sends
it the hook's dump signal, analyzes the snapshot and attaches the finding:
the alert then names the line. --dump PID does that once, now, and prints
the analysis. --ui serves a live page of the node's processes at /.

--follow LOG reads a serving engine's log as it is written (SGLang or vLLM;
a file followed across rotation and truncation, or - for standard input)
and judges its KV pool as analyze does: vramscope_pool_* metrics per pool
and rank, and the state at /api/pools. Without a GPU it follows the log
alone.

Exit status 2 when no NVIDIA driver is found and nothing is followed.`,
		Example: `  vramscope watch --data /var/lib/vramscope
  vramscope watch --ui --window 5m
  vramscope watch --dump 4242
  vramscope watch --follow /var/log/sglang/server.log`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("dump") {
				return runDump(cmd.Context(), stdout, fl)
			}
			return runWatch(cmd.Context(), stderr, fl)
		},
	}
	f := cmd.Flags()
	f.DurationVar(&fl.interval, "interval", time.Second, "time between samples")
	f.StringVar(&fl.listen, "listen", "127.0.0.1:9400", "serve /metrics (and the page, with --ui) on `HOST:PORT`")
	f.StringSliceVar(&fl.allowHosts, "allow-host", nil, "answer requests for this `NAME` too when listening on loopback (others are refused: DNS rebinding)")
	f.StringVar(&fl.data, "data", "", "keep the history in `DIR` (created if missing; none when empty)")
	f.DurationVar(&fl.keepRaw, "keep-raw", history.DefaultOptions.Raw, "keep every sample this long, then per-minute min, max and last")
	f.DurationVar(&fl.retention, "retention", history.DefaultOptions.Retention, "keep the per-minute history this long")
	f.DurationVar(&fl.window, "window", verdict.DefaultConfig.Window, "how much history a verdict looks at")
	f.Var(&fl.minRate, "min-rate", "slowest growth a minute that counts as a leak (e.g. 1MiB)")
	f.Float64Var(&fl.steadiness, "steadiness", trend.MinSteadiness, "Kendall tau above which growth counts as steady, as in analyze")
	f.BoolVar(&fl.capture, "capture", true, "ask processes under the capture hook for a snapshot when they turn into a leak")
	f.DurationVar(&fl.captureEvery, "capture-every", 30*time.Minute, "ask one process for a snapshot at most this often")
	f.DurationVar(&fl.captureTimeout, "capture-timeout", 2*time.Minute, "wait this long for a snapshot")
	f.StringVar(&fl.procRoot, "proc", "/proc", "the proc file system the GPU processes are in (/host/proc in a container)")
	f.BoolVar(&fl.args, "cmdline-args", false, "show command lines with their arguments (they may hold secrets)")
	f.StringVar(&fl.hostname, "hostname", "", "the Hostname label (default $NODE_NAME, else the host name)")
	f.BoolVar(&fl.ui, "ui", false, "serve the live page at / (it shows command lines and can ask for snapshots)")
	f.IntVar(&fl.dump, "dump", 0, "ask process `PID` (running under the hook) for a snapshot now, print its analysis and exit")
	f.BoolVar(&fl.json, "json", false, "with --dump, print the analysis as JSON")
	f.StringVar(&fl.follow, "follow", "", "judge the pools of the serving log `LOG` as it is written (- for standard input)")
	return cmd
}

func (fl watchFlags) verdictConfig() verdict.Config {
	return verdict.Config{Window: fl.window, MinRate: float64(fl.minRate.Bytes), Steadiness: fl.steadiness, Buckets: verdict.DefaultConfig.Buckets}
}

func (fl watchFlags) capturer() *dump.Capturer {
	return &dump.Capturer{ProcRoot: fl.procRoot, Timeout: fl.captureTimeout, MaxInputs: 4, Options: analyze.Options{}}
}

func (fl watchFlags) procReader() *proc.Reader {
	return &proc.Reader{Root: fl.procRoot, Args: fl.args, Keep: dump.EnvVars}
}

// runDump captures one process now and prints the analysis.
func runDump(ctx context.Context, stdout io.Writer, fl watchFlags) error {
	id, err := fl.procReader().Read(fl.dump)
	if err != nil {
		return &inputError{msg: err.Error()}
	}
	res, err := fl.capturer().Capture(ctx, id)
	if err != nil {
		return &inputError{msg: err.Error()}
	}
	if fl.json {
		return writeJSON(stdout, res.Report)
	}
	fmt.Fprintf(stdout, "snapshot: %s (%.1f s)\n\n", res.Dump, res.Seconds)
	return writeAnalysis(stdout, res.Report)
}

func runWatch(ctx context.Context, stderr io.Writer, fl watchFlags) error {
	if fl.interval <= 0 {
		return fmt.Errorf("--interval %v: want a positive duration", fl.interval)
	}
	vc := fl.verdictConfig()
	if err := vc.Validate(); err != nil {
		return err
	}
	// A DaemonSet's pod is stopped with SIGTERM: flush the history first.
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM)
	defer stop()
	src, err := gpu.OpenNVML()
	switch {
	case err != nil && fl.follow == "":
		// gpu.ErrNoDriver says so plainly; either way there is nothing
		// to watch: exit 2.
		return &inputError{msg: "watch: " + err.Error()}
	case err != nil:
		fmt.Fprintf(stderr, "vramscope: watch: %v: following %s alone\n", err, fl.follow)
		src = nil
	default:
		defer src.Close()
	}
	// Listen before sampling, so that a busy port fails at once.
	ln, err := net.Listen("tcp", fl.listen)
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	defer ln.Close()
	var store *history.Store
	if fl.data != "" {
		if err := os.MkdirAll(fl.data, 0o755); err != nil {
			return &outputError{path: fl.data, err: err}
		}
		store, err = history.Open(filepath.Join(fl.data, "history.db"), history.Options{Raw: fl.keepRaw, Retention: fl.retention, FlushEvery: 5 * time.Second})
		if err != nil {
			return &outputError{path: fl.data, err: err}
		}
		defer store.Close()
	}
	var capt agent.Capturer
	if fl.capture {
		capt = fl.capturer()
	}
	var a *agent.Agent
	if src != nil {
		a, err = agent.New(agent.Config{Verdict: vc, Capture: fl.capture, CaptureEvery: fl.captureEvery, CompactEvery: 10 * time.Minute, Log: stderr},
			src, fl.procReader(), store, capt)
		if err != nil {
			return err
		}
	}
	hostname := fl.hostname
	if hostname == "" {
		hostname = os.Getenv("NODE_NAME")
	}
	if hostname == "" {
		hostname, _ = os.Hostname()
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	served := "metrics on http://" + ln.Addr().String() + "/metrics"
	if a != nil {
		reg.MustRegister(metrics.New(a, hostname))
		if fl.ui {
			mux.Handle("/", ui.Handler(a, ui.Options{Hostname: hostname, Report: writeReportPage}))
			served += ", page on http://" + ln.Addr().String() + "/"
		}
	}
	if fl.follow != "" {
		fo := follow.New(fl.follow, follow.Options{Poll: fl.interval, Judge: follow.DefaultOptions.Judge, Log: stderr})
		reg.MustRegister(follow.NewCollector(fo))
		mux.Handle("GET /api/pools", fo)
		served += ", pools of " + fl.follow + " on http://" + ln.Addr().String() + "/api/pools"
		go fo.Run(ctx)
	}
	hs := localhttp.NewServer(ln.Addr(), mux, localhttp.Options{AllowHosts: fl.allowHosts, Static: ui.Static})
	go hs.Serve(ln)
	if a != nil {
		fmt.Fprintf(stderr, "vramscope: watching %s (driver %s) every %v; %s\n", hostname, src.Driver(), fl.interval, served)
		err = a.Run(ctx, fl.interval)
	} else {
		fmt.Fprintf(stderr, "vramscope: watching %s; %s\n", hostname, served)
		<-ctx.Done()
		err = nil
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hs.Shutdown(shutdown)
	return err
}

// writeReportPage writes report's HTML page of snapshot files: the live
// page links each captured process to it.
func writeReportPage(ctx context.Context, w io.Writer, title string, paths []string) error {
	vl, err := loadViews(ctx, io.Discard, paths, viewFlags{buckets: 1200}, nil)
	if err != nil {
		return err
	}
	return page.Write(w, title, vl.payload)
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/vramscope/vramscope/inputs"
	"github.com/vramscope/vramscope/internal/localhttp"
	"github.com/vramscope/vramscope/replay"
	"github.com/vramscope/vramscope/report/web"
	"github.com/vramscope/vramscope/snapshot"
)

func newServeCommand(stderr io.Writer) *cobra.Command {
	var fl viewFlags
	var addr string
	var allowHosts []string
	cmd := &cobra.Command{
		Use:   "serve [flags] PATH... [--addr 127.0.0.1:8080]",
		Short: "Serve the report's views in the browser, with any moment and any two snapshots on demand",
		Long: `Serve shows what report writes, interactively: click the timeline to get the
allocator state and the flame graph of live memory right after that event,
and compare the live bytes per callsite of any two snapshots (of one process
or of two). The page opens at once and shows the loading progress; the
snapshots stay in memory while the server runs.

It binds to the loopback address by default: a snapshot's stacks name your
code. There it answers only requests for that address (localhost, 127.0.0.1,
[::1] and the port; --allow-host adds a name), so another site cannot point
its name at it, and another site's page gets nothing but the page itself.
Stop it with Ctrl-C.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runServe(cmd.Context(), stderr, args, addr, allowHosts, fl)
		},
	}
	fl.register(cmd)
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8080", "listen on `HOST:PORT` (port 0 picks a free one)")
	cmd.Flags().StringSliceVar(&allowHosts, "allow-host", nil, "answer requests for this `NAME` too when listening on loopback (others are refused: DNS rebinding)")
	return cmd
}

func runServe(ctx context.Context, stderr io.Writer, args []string, addr string, allowHosts []string, fl viewFlags) error {
	ins, _, err := inputs.Expand(args)
	if err != nil {
		return &inputError{msg: err.Error()}
	}
	// Listen before loading, so that a busy port fails at once.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	// The builder is made by loadViews; the server needs it only once the
	// views are ready, so it starts with none and gets it from Ready.
	srv := web.New("vramscope", len(ins))
	fmt.Fprintf(stderr, "vramscope: serving http://%s/ (loading %d inputs)\n", ln.Addr(), len(ins))
	go loadForServe(ctx, stderr, args, fl, srv)

	hs := localhttp.NewServer(ln.Addr(), srv.Handler(), localhttp.Options{AllowHosts: allowHosts, Static: web.Static})
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		hs.Shutdown(shut)
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// loadForServe loads the inputs in the background, keeping every
// snapshot and its timelines for the on-demand views.
func loadForServe(ctx context.Context, stderr io.Writer, args []string, fl viewFlags, srv *web.Server) {
	var mu sync.Mutex
	loaded := map[string]web.Loaded{}
	vl, err := loadViews(ctx, stderr, args, fl, func(in inputs.Input, sn *snapshot.Snapshot, tls []*replay.Timeline) {
		mu.Lock()
		defer mu.Unlock()
		loaded[in.Path] = web.Loaded{Snapshot: sn, Timelines: tls}
		srv.Progress(len(loaded), in.String())
	})
	if err != nil {
		srv.Fail(err)
		return
	}
	if vl.failed > 0 {
		fmt.Fprintf(stderr, "vramscope: %d of %d inputs could not be read\n", vl.failed, vl.total)
	}
	if vl.inconsistent != nil {
		warnInconsistent(stderr, vl.inconsistent)
	}
	srv.Ready(vl.payload, vl.builder, loaded)
	fmt.Fprintf(stderr, "vramscope: loaded %d snapshots: verdict %s\n", len(loaded), vl.payload.Verdict)
}

package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer the server's goroutines and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serve on loopback answers its own address and an allowed name, and
// refuses a rebound name and another site's fetch of the API.
func TestServeAnswersItsOwnPageOnly(t *testing.T) {
	fromRepoRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	var stderr syncBuffer
	done := make(chan int)
	go func() {
		done <- run(ctx, io.Discard, &stderr, []string{"serve", "--addr", "127.0.0.1:0", "--allow-host", "gpu-box.local", "snapshot/testdata/format/train.pickle"})
	}()
	defer func() {
		cancel()
		<-done
	}()
	served := regexp.MustCompile(`serving http://(127\.0\.0\.1:\d+)/`)
	var addr string
	for start := time.Now(); addr == "" && time.Since(start) < 10*time.Second; time.Sleep(10 * time.Millisecond) {
		if m := served.FindStringSubmatch(stderr.String()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		t.Fatalf("no address in %q", stderr.String())
	}
	port := addr[len("127.0.0.1:"):]
	for _, c := range []struct {
		name, host, path string
		headers          map[string]string
		want             int
	}{
		{"its address", addr, "/api/status", nil, 200},
		{"localhost", "localhost:" + port, "/api/status", nil, 200},
		{"an allowed name", "gpu-box.local:" + port, "/api/status", nil, 200},
		{"a rebound name", "evil.example:" + port, "/api/status", nil, 403},
		{"a rebound name, the page", "evil.example:" + port, "/", nil, 403},
		{"another site's fetch", addr, "/api/status", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"}, 403},
		{"another site's link to the page", addr, "/", map[string]string{"Sec-Fetch-Site": "cross-site"}, 200},
	} {
		req, _ := http.NewRequest("GET", "http://"+addr+c.path, nil)
		req.Host = c.host
		for k, v := range c.headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: status %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}
}

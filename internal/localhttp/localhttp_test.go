package localhttp

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestGuard(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	any := &net.TCPAddr{IP: net.IPv4zero, Port: 8080}
	opts := Options{AllowHosts: []string{"gpu-box.local"}, Static: []string{"/"}}
	cases := []struct {
		name    string
		addr    net.Addr
		method  string
		target  string
		host    string
		headers map[string]string
		want    int
	}{
		{"loopback by 127.0.0.1", loopback, "GET", "/api/report", "127.0.0.1:8080", nil, 200},
		{"loopback by localhost", loopback, "GET", "/api/report", "LOCALHOST:8080", nil, 200},
		{"loopback by [::1]", loopback, "GET", "/api/report", "[::1]:8080", nil, 200},
		{"an allowed name", loopback, "GET", "/api/report", "gpu-box.local:8080", nil, 200},
		{"rebound name", loopback, "GET", "/api/report", "evil.example:8080", nil, 403},
		{"rebound name, static page", loopback, "GET", "/", "evil.example", nil, 403},
		{"allowed name, other port", loopback, "GET", "/", "gpu-box.local:9090", nil, 403},
		{"every address: any name", any, "GET", "/api/report", "node7:8080", nil, 200},
		{"same origin fetch", loopback, "GET", "/api/report", "127.0.0.1:8080",
			map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://127.0.0.1:8080"}, 200},
		{"typed into the address bar", loopback, "GET", "/api/report", "localhost:8080", map[string]string{"Sec-Fetch-Site": "none"}, 200},
		{"cross-site fetch of the API", loopback, "GET", "/api/report", "localhost:8080", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"same-site fetch of the API", loopback, "GET", "/api/report", "localhost:8080", map[string]string{"Sec-Fetch-Site": "same-site"}, 403},
		{"cross-origin Origin", loopback, "GET", "/api/state", "localhost:8080", map[string]string{"Origin": "http://evil.example"}, 403},
		{"cross-site link to the page", loopback, "GET", "/", "localhost:8080", map[string]string{"Sec-Fetch-Site": "cross-site"}, 200},
		{"cross-site POST to the page", loopback, "POST", "/", "localhost:8080", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"cross-origin POST, every address", any, "POST", "/api/dump", "node7:8080", map[string]string{"Origin": "http://evil.example"}, 403},
		{"same-origin POST, every address", any, "POST", "/api/dump", "node7:8080", map[string]string{"Origin": "http://node7:8080"}, 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(c.method, c.target, nil)
			r.Host = c.host
			for k, v := range c.headers {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			Guard(c.addr, ok, opts).ServeHTTP(w, r)
			if w.Code != c.want {
				t.Errorf("status %d, want %d (%s)", w.Code, c.want, strings.TrimSpace(w.Body.String()))
			}
		})
	}
}

// The server's timeouts are set, and a real connection to it by a
// rebound name is refused.
func TestNewServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := NewServer(ln.Addr(), http.NotFoundHandler(), Options{})
	if hs.ReadHeaderTimeout != ReadHeaderTimeout || hs.IdleTimeout != IdleTimeout {
		t.Errorf("timeouts %v, %v", hs.ReadHeaderTimeout, hs.IdleTimeout)
	}
	go hs.Serve(ln)
	defer hs.Close()
	req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/", nil)
	req.Host = "rebound.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("status %d, want 403", resp.StatusCode)
	}
}

// Package localhttp is the HTTP server of a command that serves its own
// page, such as serve and watch: a page whose API names the user's files
// and code, answered only to that page.
//
// Bound to a loopback address, it answers only requests whose Host names
// that address (localhost, 127.0.0.1 or [::1] with its port, or a name
// allowed by the user): a web page the user visits can point its own name
// at 127.0.0.1 (DNS rebinding), but its requests then carry its name. On
// any address, a browser's cross-origin request (Sec-Fetch-Site, Origin)
// gets only the static paths, never the API or an action. Tools that send
// neither header (curl, Prometheus) are not browsers and pass.
package localhttp

import (
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Options configure a guarded handler.
type Options struct {
	// AllowHosts are more names the Host header may carry on a loopback
	// address (a name in /etc/hosts, say); the port must still be the
	// server's.
	AllowHosts []string
	// Static are the paths a cross-origin GET may have: pages that hold
	// no data of their own.
	Static []string
}

// Timeouts of the server: a client that opens connections and sends
// nothing, or keeps them idle, does not hold them for ever.
const (
	ReadHeaderTimeout = 10 * time.Second
	IdleTimeout       = 2 * time.Minute
)

// NewServer returns a server of h for the listener bound to addr, with
// Guard and the timeouts.
func NewServer(addr net.Addr, h http.Handler, opts Options) *http.Server {
	return &http.Server{
		Handler:           Guard(addr, h, opts),
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       IdleTimeout,
	}
}

// Guard wraps h, served on addr, with the Host check (on a loopback
// address) and the refusal of cross-origin requests but static GETs.
func Guard(addr net.Addr, h http.Handler, opts Options) http.Handler {
	hosts := loopbackHosts(addr, opts.AllowHosts)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hosts != nil && !slices.Contains(hosts, strings.ToLower(r.Host)) {
			http.Error(w, "host "+r.Host+" not allowed: this server answers its loopback address only (--allow-host adds a name)", http.StatusForbidden)
			return
		}
		static := (r.Method == http.MethodGet || r.Method == http.MethodHead) && slices.Contains(opts.Static, r.URL.Path)
		if !static && crossOrigin(r) {
			http.Error(w, "cross-origin request refused", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// loopbackHosts are the Host values a server on addr answers, or nil if
// addr is not a loopback address (a server bound to every address is
// meant to be reached by other names).
func loopbackHosts(addr net.Addr, allow []string) []string {
	ta, ok := addr.(*net.TCPAddr)
	if !ok || !ta.IP.IsLoopback() {
		return nil
	}
	port := ta.AddrPort().Port()
	names := append([]string{"localhost", "127.0.0.1", "[::1]", hostName(ta.IP)}, allow...)
	var hosts []string
	for _, n := range names {
		n = strings.ToLower(n)
		hosts = append(hosts, net.JoinHostPort(strings.Trim(n, "[]"), strconv.Itoa(int(port))))
		if port == 80 { // browsers leave the default port out
			hosts = append(hosts, n)
		}
	}
	return hosts
}

func hostName(ip net.IP) string {
	if ip.To4() == nil {
		return "[" + ip.String() + "]"
	}
	return ip.String()
}

// crossOrigin reports whether a browser sent r for a page of another
// origin: Sec-Fetch-Site says so (its "none" is the user's own navigation),
// or Origin names another server than the one r was sent to.
func crossOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return true
	}
	origin := r.Header.Get("Origin")
	return origin != "" && !strings.EqualFold(origin, "http://"+r.Host)
}

package server

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// Access says who may reach the server, and by which names. A web page on
// another site must get nothing from it: DNS rebinding (a name that flips
// to 127.0.0.1) meets the Host check, a cross-site form or fetch the CSRF
// protection, a websocket from another origin the Origin check, and
// anything else — another user of the machine, a neighbour on the network
// — the token.
type Access struct {
	// Hosts are the names (or addresses) the server answers to besides
	// the loopback ones (localhost, *.localhost, 127.0.0.0/8, ::1), each
	// a host with or without a port. AnyHost answers to every name (a
	// class server reached under names it cannot know).
	Hosts   []string
	AnyHost bool
	// Token, when set, must come with every request: once in the URL
	// (?token=…, as Jupyter's), then in the HttpOnly cookie that request
	// sets.
	Token string
	// Secure marks cookies Secure (the server is reached over HTTPS).
	Secure bool
	// TrustProxy takes a request's client address from X-Forwarded-For
	// when the request comes from loopback (a reverse proxy on this
	// machine, as --public-url says there is), so that limits per address
	// count learners, not the proxy.
	TrustProxy bool
}

// clientAddr is the address a request comes from, for limits per address.
func (a *Access) clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if !a.TrustProxy {
		return host
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return host
	}
	xff := r.Header.Get("X-Forwarded-For")
	if xff == "" {
		return host
	}
	// The proxy appends the address it saw last.
	parts := strings.Split(xff, ",")
	if ip := net.ParseIP(strings.TrimSpace(parts[len(parts)-1])); ip != nil {
		return ip.String()
	}
	return host
}

// NewToken returns a fresh random token.
func NewToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// tokenCookie keeps the local lab's token.
const tokenCookie = "svclab-token"

// hostAllowed tells whether a request naming host (its Host header, with
// or without a port) is for this server.
func (a *Access) hostAllowed(host string) bool {
	if a.AnyHost {
		return true
	}
	h := strings.ToLower(host)
	name, _ := splitHost(h, "")
	if isLoopbackName(name) {
		return true
	}
	return a.listed(h, name)
}

// listed tells whether host (lower case; name is its name without the
// port) is one of Hosts.
func (a *Access) listed(h, name string) bool {
	for _, allowed := range a.Hosts {
		allowed = strings.ToLower(strings.TrimSuffix(allowed, "."))
		if allowed == h || allowed == name {
			return true
		}
	}
	return false
}

// splitHost splits a Host header or an Origin's host into its name
// (lower case, without brackets or a final dot) and its port (defaultPort
// when it names none).
func splitHost(host, defaultPort string) (name, port string) {
	name, port = strings.ToLower(host), defaultPort
	if h, p, err := net.SplitHostPort(name); err == nil {
		name, port = h, p
	}
	return strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(name, "]"), "["), "."), port
}

// isLoopbackName tells whether name (splitHost's) is this machine's:
// localhost, *.localhost or a loopback address.
func isLoopbackName(name string) bool {
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}

// originAllowed is the websockets' Origin check: a browser always sends
// one, and it must be a page of this server; a client without one
// (svclab's own tools) is let through. A page of this server is one from
// the host the socket was asked of, from one of Hosts, or from another
// name of this machine on the server's own port: a page served on another
// port of this machine (another local server, a file server showing a
// downloaded page) is another origin, although the browser shares cookies
// between ports.
func (a *Access) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	if a.AnyHost {
		// No list to check against: the page must be from the host the
		// socket was asked of.
		return false
	}
	defaultPort := map[string]string{"http": "80", "https": "443"}[u.Scheme]
	name, port := splitHost(u.Host, defaultPort)
	if isLoopbackName(name) {
		serverDefault := "80"
		if r.TLS != nil {
			serverDefault = "443"
		}
		serverName, serverPort := splitHost(r.Host, serverDefault)
		return isLoopbackName(serverName) && port == serverPort
	}
	return a.listed(strings.ToLower(u.Host), name)
}

// Guard refuses requests for other names and, with a token, requests
// without it. /healthz and the static files need neither token nor name.
func (a *Access) Guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			next.ServeHTTP(w, r)
			return
		}
		if !a.hostAllowed(r.Host) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusMisdirectedRequest)
			fmt.Fprintf(w, "refused: svclab does not answer to the name %q (a page on another site may have pointed that name at this machine). Open svclab at http://127.0.0.1 or http://localhost, or start it with --allowed-host.\n", r.Host)
			return
		}
		if a.Token == "" || strings.HasPrefix(r.URL.Path, "/static/") || strings.HasPrefix(r.URL.Path, "/assets/") {
			next.ServeHTTP(w, r)
			return
		}
		if t := r.URL.Query().Get("token"); t != "" && r.Method == http.MethodGet {
			if !a.tokenOK(t) {
				a.refuse(w, "the token in this link is not this server's")
				return
			}
			http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: t, Path: "/", HttpOnly: true, Secure: a.Secure,
				SameSite: http.SameSiteStrictMode, MaxAge: int((30 * 24 * time.Hour).Seconds())})
			// The token leaves the address bar (and the history).
			q := r.URL.Query()
			q.Del("token")
			u := *r.URL
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		if c, err := r.Cookie(tokenCookie); err == nil && a.tokenOK(c.Value) {
			next.ServeHTTP(w, r)
			return
		}
		a.refuse(w, "this server needs its token")
	})
}

func (a *Access) tokenOK(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(a.Token)) == 1
}

func (a *Access) refuse(w http.ResponseWriter, why string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusUnauthorized)
	fmt.Fprintf(w, "%s: open the link svclab printed when it started (it ends in ?token=…).\n", why)
}

// upgrader upgrades the server's websockets, from its own pages only.
func (s *Server) upgrader() *websocket.Upgrader {
	return &websocket.Upgrader{
		ReadBufferSize:  1024,
		WriteBufferSize: 4096,
		CheckOrigin:     s.access().originAllowed,
	}
}

// access is the server's Access (loopback names, no token, when unset).
func (s *Server) access() *Access {
	if s.Access == nil {
		return &Access{}
	}
	return s.Access
}

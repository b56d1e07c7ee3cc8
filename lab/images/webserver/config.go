package webserver

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// config is what the server takes from nginx's configuration files: the
// addresses to listen on, the document root and the index files.
type config struct {
	listen []string // Go listen addresses, ":80"
	root   string
	index  []string
}

// parseNginx reads the main configuration file and the files it includes
// and keeps the directives the server honours: listen, root and index
// (the first server block's, where several are given). Other directives
// are accepted and ignored, so real configurations load.
func parseNginx(mainFile string) (config, error) {
	tokens, err := tokenizeFile(mainFile, filepath.Dir(mainFile), 0)
	if err != nil {
		return config{}, err
	}
	var cfg config
	servers := 0
	depth := 0
	serverDepth := -1
	var stmt []string
	for _, t := range tokens {
		switch t {
		case "{":
			if len(stmt) > 0 && stmt[0] == "server" && serverDepth < 0 {
				serverDepth = depth
				servers++
			}
			depth++
			stmt = nil
		case "}":
			depth--
			if depth < 0 {
				return config{}, fmt.Errorf("unexpected \"}\" in %s", mainFile)
			}
			if depth == serverDepth {
				serverDepth = -1
			}
			stmt = nil
		case ";":
			if len(stmt) > 0 {
				if err := cfg.directive(stmt, serverDepth >= 0 && servers == 1); err != nil {
					return config{}, fmt.Errorf("%w in %s", err, mainFile)
				}
			}
			stmt = nil
		default:
			stmt = append(stmt, t)
		}
	}
	if depth != 0 {
		return config{}, fmt.Errorf("unexpected end of file, expecting \"}\" in %s", mainFile)
	}
	return cfg, nil
}

func (c *config) directive(stmt []string, firstServer bool) error {
	if !firstServer {
		return nil
	}
	switch stmt[0] {
	case "listen":
		if len(stmt) < 2 {
			return fmt.Errorf("invalid number of arguments in \"listen\" directive")
		}
		addr, err := listenAddr(stmt[1])
		if err != nil {
			return err
		}
		for _, a := range c.listen {
			if a == addr {
				return nil
			}
		}
		c.listen = append(c.listen, addr)
	case "root":
		if len(stmt) != 2 {
			return fmt.Errorf("invalid number of arguments in \"root\" directive")
		}
		if c.root == "" {
			c.root = stmt[1]
		}
	case "index":
		if len(c.index) == 0 {
			c.index = append(c.index, stmt[1:]...)
		}
	}
	return nil
}

// listenAddr turns an nginx listen value ("80", "[::]:80", "0.0.0.0:8080",
// "127.0.0.1:8080") into a Go listen address. The wildcard addresses
// become ":port", which listens on IPv4 and IPv6.
func listenAddr(v string) (string, error) {
	if isPort(v) {
		return ":" + v, nil
	}
	host, port, err := net.SplitHostPort(v)
	if err != nil || !isPort(port) {
		return "", fmt.Errorf("invalid port in \"%s\" of the \"listen\" directive", v)
	}
	switch host {
	case "", "*", "0.0.0.0", "::":
		return ":" + port, nil
	}
	return net.JoinHostPort(host, port), nil
}

func isPort(s string) bool {
	if s == "" || len(s) > 5 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// tokenizeFile splits a configuration file into words and the punctuation
// ";", "{" and "}", following include directives (relative to prefix).
func tokenizeFile(path, prefix string, level int) ([]string, error) {
	if level > 8 {
		return nil, fmt.Errorf("includes nested too deeply at %s", path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("open() \"%s\" failed (%w)", path, err)
	}
	raw := tokenize(string(data))
	var out []string
	for i := 0; i < len(raw); i++ {
		if raw[i] == "include" && i+2 < len(raw) && raw[i+2] == ";" {
			pattern := raw[i+1]
			if !filepath.IsAbs(pattern) {
				pattern = filepath.Join(prefix, pattern)
			}
			matches, _ := filepath.Glob(pattern)
			sort.Strings(matches)
			for _, m := range matches {
				if strings.HasSuffix(m, "mime.types") {
					continue
				}
				sub, err := tokenizeFile(m, prefix, level+1)
				if err != nil {
					return nil, err
				}
				out = append(out, sub...)
			}
			i += 2
			continue
		}
		out = append(out, raw[i])
	}
	return out, nil
}

func tokenize(s string) []string {
	var out []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			out = append(out, cur.String())
			cur.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '#':
			flush()
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'':
			flush()
			j := i + 1
			for j < len(s) && s[j] != c {
				if s[j] == '\\' {
					j++
				}
				j++
			}
			if j > len(s) {
				j = len(s)
			}
			out = append(out, s[i+1:min(j, len(s))])
			i = j
		case c == ';' || c == '{' || c == '}':
			flush()
			out = append(out, string(c))
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			flush()
		default:
			cur.WriteByte(c)
		}
	}
	flush()
	return out
}

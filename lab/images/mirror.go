package images

import (
	"bufio"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// DefaultMirror is used when the machine's apt sources name no Debian
// mirror.
const DefaultMirror = "http://deb.debian.org/debian"

// DetectMirror returns the Debian mirror configured for apt in aptDir
// (normally /etc/apt): the first "deb" source whose path ends in /debian,
// from sources.list and then sources.list.d (one-line .list files and
// deb822 .sources files). It returns DefaultMirror when there is none.
func DetectMirror(aptDir string) string {
	files := []string{filepath.Join(aptDir, "sources.list")}
	for _, pattern := range []string{"*.list", "*.sources"} {
		m, _ := filepath.Glob(filepath.Join(aptDir, "sources.list.d", pattern))
		sort.Strings(m)
		files = append(files, m...)
	}
	for _, f := range files {
		var uris []string
		if strings.HasSuffix(f, ".sources") {
			uris = deb822URIs(f)
		} else {
			uris = oneLineURIs(f)
		}
		for _, u := range uris {
			if isDebianArchive(u) {
				return strings.TrimSuffix(u, "/")
			}
		}
	}
	return DefaultMirror
}

func isDebianArchive(uri string) bool {
	if !strings.HasPrefix(uri, "http://") && !strings.HasPrefix(uri, "https://") {
		return false
	}
	return strings.HasSuffix(strings.TrimSuffix(uri, "/"), "/debian")
}

// oneLineURIs reads "deb [options] URI suite components" lines.
func oneLineURIs(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, "#"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		fields := strings.Fields(line)
		if len(fields) < 3 || fields[0] != "deb" {
			continue
		}
		fields = fields[1:]
		if strings.HasPrefix(fields[0], "[") {
			for len(fields) > 0 && !strings.HasSuffix(fields[0], "]") {
				fields = fields[1:]
			}
			if len(fields) > 0 {
				fields = fields[1:]
			}
		}
		if len(fields) > 0 {
			out = append(out, fields[0])
		}
	}
	return out
}

// deb822URIs reads the URIs of enabled "Types: deb" stanzas.
func deb822URIs(path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, stanza := range strings.Split(string(data), "\n\n") {
		fields := map[string]string{}
		for _, line := range strings.Split(stanza, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "#") {
				continue
			}
			k, v, ok := strings.Cut(line, ":")
			if !ok || strings.HasPrefix(line, " ") {
				continue
			}
			fields[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
		}
		if !contains(strings.Fields(fields["types"]), "deb") || strings.EqualFold(fields["enabled"], "no") {
			continue
		}
		out = append(out, strings.Fields(fields["uris"])...)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

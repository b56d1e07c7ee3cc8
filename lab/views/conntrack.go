package views

import (
	"strconv"
	"strings"
)

// parseConntrack reads `conntrack -L` lines and keeps the entries whose
// original destination is one of targets (ip:port → Service id); a target
// with port 0 matches every port of the address.
func parseConntrack(out string, targets map[string]string) []ConntrackRow {
	var rows []ConntrackRow
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		row := ConntrackRow{Proto: f[0]}
		row.TTL, _ = strconv.Atoi(f[2])
		var kv [][2]string
		for _, w := range f[3:] {
			if k, v, ok := strings.Cut(w, "="); ok {
				kv = append(kv, [2]string{k, v})
			} else if strings.HasPrefix(w, "[") {
				row.Flags = strings.TrimSpace(row.Flags + " " + strings.Trim(w, "[]"))
			} else if len(kv) == 0 {
				row.State = w
			}
		}
		var src, dst, sport, dport, rsrc, rsport string
		seen := map[string]int{}
		for _, p := range kv {
			seen[p[0]]++
			first := seen[p[0]] == 1
			switch {
			case p[0] == "src" && first:
				src = p[1]
			case p[0] == "dst" && first:
				dst = p[1]
			case p[0] == "sport" && first:
				sport = p[1]
			case p[0] == "dport" && first:
				dport = p[1]
			case p[0] == "src":
				rsrc = p[1]
			case p[0] == "sport":
				rsport = p[1]
			}
		}
		svc, ok := targets[dst+":"+dport]
		if !ok {
			svc, ok = targets[dst+":0"]
		}
		if !ok {
			continue
		}
		row.Service = svc
		row.Src, row.Dst, row.Backend = hostPort(src, sport), hostPort(dst, dport), hostPort(rsrc, rsport)
		rows = append(rows, row)
	}
	return rows
}

func hostPort(ip, port string) string {
	if port == "" {
		return ip
	}
	return ip + ":" + port
}

// key identifies an entry across reads.
func (r ConntrackRow) key() string { return r.Proto + " " + r.Src + " " + r.Dst }

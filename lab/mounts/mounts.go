package mounts

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// List returns the mount points of the calling process's mount namespace
// that match accepts, deepest first, each once.
func List(match func(mountPoint string) bool) ([]string, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	return parse(b, match), nil
}

// Beneath is a match for List: dir and every path below it.
func Beneath(dir string) func(string) bool {
	dir = filepath.Clean(dir)
	return func(mp string) bool { return mp == dir || strings.HasPrefix(mp, dir+"/") }
}

// Below is a match for List: every path below dir, not dir itself.
func Below(dir string) func(string) bool {
	dir = filepath.Clean(dir) + "/"
	return func(mp string) bool { return strings.HasPrefix(mp, dir) }
}

func parse(mountinfo []byte, match func(string) bool) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		if mp := Unescape(f[4]); match(mp) {
			out = append(out, mp)
		}
	}
	slices.SortStableFunc(out, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return slices.Compact(out)
}

// Unescape undoes mountinfo's octal escapes (\040 for a space, \134 for a
// backslash).
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

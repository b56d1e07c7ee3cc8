package netpol

import (
	"strings"
	"testing"
)

// TestQuote feeds quote what the lab's API objects could carry if the API
// server did not validate them: nothing ends the literal or its line.
func TestQuote(t *testing.T) {
	for _, in := range []string{
		`plain`,
		"x\"\ninclude \"/etc/shadow\"\n#",
		"x\\\"; flush ruleset; #",
		"tab\tcr\rnul\x00del\x7f",
		"unicode \u2028 line separator é",
		strings.Repeat("a", 500),
	} {
		got := quote(in)
		inner := got[1 : len(got)-1]
		if got[0] != '"' || got[len(got)-1] != '"' || strings.ContainsAny(inner, "\"\\") {
			t.Errorf("quote(%q) = %s: the literal can be ended inside", in, got)
		}
		for _, r := range inner {
			if r < 0x20 || r > 0x7e {
				t.Errorf("quote(%q) = %q keeps %U", in, got, r)
			}
		}
		if len(inner) > 120 {
			t.Errorf("quote(%q) is %d long", in, len(inner))
		}
	}
	if got := quote("default/allow-web"); got != `"default/allow-web"` {
		t.Errorf("a plain name changed: %s", got)
	}
}

package web

import "testing"

func TestMarkdown(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"Hello **bold** and *it* and `a<b>`", "<p>Hello <strong>bold</strong> and <em>it</em> and <code>a&lt;b&gt;</code></p>"},
		{"one\ntwo\n\nthree", "<p>one two</p><p>three</p>"},
		{"```\n  kubectl get x\n  y\n```", "<pre><code>kubectl get x\ny</code></pre>"},
		{"- a\n- b\n  more\n\n1. x\n2. y", "<ul><li>a</li><li>b more</li></ul><ol><li>x</li><li>y</li></ol>"},
		{"<script>alert(1)</script>", "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>"},
		{"`**not bold**` and `", "<p><code>**not bold**</code> and `</p>"},
		{"into the **`no-endpoint-services`** map", "<p>into the <strong><code>no-endpoint-services</code></strong> map</p>"},
	} {
		if got := renderMarkdown(tc.in); got != tc.want {
			t.Errorf("%q:\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}

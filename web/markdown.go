package web

import (
	"html"
	"regexp"
	"strings"

	"github.com/a-h/templ"
)

// Markdown renders the Markdown of scenario texts (tasks, hints,
// explanations): paragraphs, fenced code blocks, bulleted and numbered
// lists, **bold**, *italic* and `code`. Everything else is text, escaped.
func Markdown(src string) templ.Component {
	return templ.Raw(renderMarkdown(src))
}

var (
	// boldCodeRE is bold around a code span (**`x`**), which the split at
	// backticks leaves as stars on both sides of the <code> element.
	boldCodeRE = regexp.MustCompile(`\*\*(<code>[^<]*</code>)\*\*`)
	boldRE     = regexp.MustCompile(`\*\*([^*]+)\*\*`)
	italicRE   = regexp.MustCompile(`(^|[^*\w])\*([^*\s][^*]*)\*`)
	numRE      = regexp.MustCompile(`^\d+\.\s+`)
)

func inline(s string) string {
	// Code spans first: their contents stay literal.
	parts := strings.Split(s, "`")
	var b strings.Builder
	for i, p := range parts {
		if i%2 == 1 && i < len(parts)-1 {
			b.WriteString("<code>" + html.EscapeString(p) + "</code>")
			continue
		}
		if i%2 == 1 { // an unmatched backtick
			b.WriteString("`")
		}
		t := html.EscapeString(p)
		t = boldRE.ReplaceAllString(t, "<strong>$1</strong>")
		t = italicRE.ReplaceAllString(t, "$1<em>$2</em>")
		b.WriteString(t)
	}
	return boldCodeRE.ReplaceAllString(b.String(), "<strong>$1</strong>")
}

func renderMarkdown(src string) string {
	var out strings.Builder
	lines := strings.Split(strings.ReplaceAll(src, "\r\n", "\n"), "\n")
	var para []string
	list := "" // "ul" or "ol" while inside a list
	var item []string
	flushItem := func() {
		if item != nil {
			out.WriteString("<li>" + inline(strings.Join(item, " ")) + "</li>")
			item = nil
		}
	}
	flushList := func() {
		flushItem()
		if list != "" {
			out.WriteString("</" + list + ">")
			list = ""
		}
	}
	flushPara := func() {
		if len(para) > 0 {
			out.WriteString("<p>" + inline(strings.Join(para, " ")) + "</p>")
			para = nil
		}
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "```"):
			flushPara()
			flushList()
			var code []string
			for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
				code = append(code, lines[i])
			}
			out.WriteString("<pre><code>" + html.EscapeString(dedent(code)) + "</code></pre>")
		case t == "":
			flushPara()
			flushItem()
		case strings.HasPrefix(t, "- ") || strings.HasPrefix(t, "* "):
			flushPara()
			if list != "ul" {
				flushList()
				list = "ul"
				out.WriteString("<ul>")
			}
			flushItem()
			item = []string{t[2:]}
		case numRE.MatchString(t):
			flushPara()
			if list != "ol" {
				flushList()
				list = "ol"
				out.WriteString("<ol>")
			}
			flushItem()
			item = []string{numRE.ReplaceAllString(t, "")}
		case item != nil && strings.HasPrefix(line, " "):
			item = append(item, t)
		default:
			flushList()
			para = append(para, t)
		}
	}
	flushPara()
	flushList()
	return out.String()
}

func dedent(lines []string) string {
	min := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, " "))
		if min < 0 || n < min {
			min = n
		}
	}
	for i, l := range lines {
		if len(l) >= min && min > 0 {
			lines[i] = l[min:]
		}
	}
	return strings.Join(lines, "\n")
}

package viewer

import (
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The pages are written in plain Go rather than with html/template:
// text/template looks fields and methods up by name through reflection,
// which makes the Go linker keep every exported method of every type in
// the binary (docs/measurements.md, "Binary size").
//
// Escaping cannot be forgotten: an htmlWriter takes constant markup only
// through m, whose parameter type (markup) is unexported and which
// TestMarkupIsConstant checks is only ever given string literals, so a
// string from a log, a model or a user has no way in but text (escaped for
// element content and double-quoted attribute values), the number
// writers, and url (a checked, escaped URL). There is no raw-HTML path.
// Every attribute the pages write is double-quoted.

// markup is constant HTML, written as it is.
type markup string

// htmlWriter accumulates a page or a part of one.
type htmlWriter struct{ b []byte }

// m writes constant markup.
func (w *htmlWriter) m(s markup) { w.b = append(w.b, s...) }

// text writes s escaped for element content or a double-quoted attribute
// value: & < > " ' become character references, NUL and invalid UTF-8
// become U+FFFD.
func (w *htmlWriter) text(s string) {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch c {
			case '&':
				w.b = append(w.b, "&amp;"...)
			case '<':
				w.b = append(w.b, "&lt;"...)
			case '>':
				w.b = append(w.b, "&gt;"...)
			case '"':
				w.b = append(w.b, "&#34;"...)
			case '\'':
				w.b = append(w.b, "&#39;"...)
			case 0:
				w.b = append(w.b, "\uFFFD"...)
			default:
				w.b = append(w.b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			w.b = append(w.b, "\uFFFD"...)
		} else {
			w.b = append(w.b, s[i:i+n]...)
		}
		i += n
	}
}

// int writes an integer.
func (w *htmlWriter) int(n int64) { w.b = strconv.AppendInt(w.b, n, 10) }

// f1 writes a number with one decimal (the SVG coordinates).
func (w *htmlWriter) f1(x float64) { w.b = strconv.AppendFloat(w.b, x, 'f', 1, 64) }

// bool writes true or false.
func (w *htmlWriter) bool(v bool) { w.b = strconv.AppendBool(w.b, v) }

// url writes u for a double-quoted href or action: an http or https URL
// with a host, or a relative reference (not a scheme-relative //host one,
// which leaves the site). Bytes a URL may not hold are percent-encoded
// and the result is attribute-escaped; anything else is written as
// "#unsafe-url", a fragment that goes nowhere.
func (w *htmlWriter) url(u string) {
	if !safeURL(u) {
		w.m("#unsafe-url")
		return
	}
	var b strings.Builder
	for i := 0; i < len(u); i++ {
		c := u[i]
		if urlByte(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte("0123456789ABCDEF"[c>>4])
		b.WriteByte("0123456789ABCDEF"[c&15])
	}
	w.text(b.String())
}

// safeURL reports whether u is an http(s) URL or a same-site relative
// reference.
func safeURL(u string) bool {
	if strings.ContainsAny(u, "\\\x00") || strings.HasPrefix(u, "//") {
		return false
	}
	p, err := url.Parse(u)
	if err != nil {
		return false
	}
	switch strings.ToLower(p.Scheme) {
	case "":
		return p.Host == "" && p.Opaque == ""
	case "http", "https":
		return p.Host != ""
	}
	return false
}

// urlByte reports whether c may appear in a URL as it is (RFC 3986's
// unreserved and reserved characters, and % of an escape).
func urlByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~:/?#[]@!$&'()*+,;=%", c) >= 0
}

// runURL is the page of a session.
func runURL(id string) string { return "/runs/" + url.PathEscape(id) }

// Pages.

func (w *htmlWriter) head(d page) {
	w.m("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>")
	w.text(d.Title)
	w.m(" · agentos</title>\n<link rel=\"stylesheet\" href=\"/assets/viewer.css\">\n<script src=\"/assets/viewer.js\" defer></script>\n</head>\n<body>\n<header class=\"top\">\n<a class=\"brand\" href=\"/runs\">agentos runs</a>\n<nav aria-label=\"account\">")
	switch {
	case d.ReadOnly:
		w.m("<span class=\"who\">read-only replay</span>")
	case d.Login != "":
		w.m("<span class=\"who\">signed in as <strong>")
		w.text(d.Login)
		w.m("</strong></span>\n<form method=\"post\" action=\"/logout\" class=\"inline\"><input type=\"hidden\" name=\"csrf\" value=\"")
		w.text(d.CSRF)
		w.m("\"><button type=\"submit\">Sign out</button></form>")
	case d.Operator:
		w.m("<span class=\"who\">operator</span>")
	case d.SignIn:
		w.m("<a class=\"button\" href=\"")
		w.url(loginURL(d.Path))
		w.m("\">Sign in with GitHub</a>")
	}
	w.m("\n</nav>\n</header>\n<main id=\"main\">\n")
}

// loginURL is sign-in, coming back to path.
func loginURL(path string) string { return "/login?next=" + url.QueryEscape(path) }

func (w *htmlWriter) foot() { w.m("</main>\n</body>\n</html>\n") }

// errorPage is a page that says what went wrong (Heading, Message).
func errorPage(d page) []byte {
	var w htmlWriter
	w.head(d)
	w.m("\n<h1>")
	w.text(d.Heading)
	w.m("</h1>\n<p>")
	w.text(d.Message)
	w.m("</p>\n")
	if d.SignIn && d.Login == "" {
		w.m("<p><a class=\"button\" href=\"")
		w.url(loginURL(d.Path))
		w.m("\">Sign in with GitHub</a> to see the sessions of repositories you can read.</p>")
	}
	w.m("\n")
	w.foot()
	return w.b
}

// listPage is /runs.
func listPage(d page) []byte {
	var w htmlWriter
	w.head(d)
	w.m("\n<h1>Sessions</h1>\n<form method=\"get\" action=\"/runs\" class=\"filters\" role=\"search\">\n<label for=\"f-repo\">Repository</label> <input id=\"f-repo\" name=\"repository\" value=\"")
	w.text(d.Filter.Repository)
	w.m("\" placeholder=\"owner/name\">\n<label for=\"f-state\">State</label>\n<select id=\"f-state\" name=\"state\">\n<option value=\"\"")
	if d.Filter.State == "" {
		w.m(" selected")
	}
	w.m(">any</option>\n")
	for _, s := range d.States {
		w.m("<option value=\"")
		w.text(s)
		w.m("\"")
		if d.Filter.State == s {
			w.m(" selected")
		}
		w.m(">")
		w.text(s)
		w.m("</option>")
	}
	w.m("\n</select>\n<button type=\"submit\">Filter</button>\n</form>\n")
	if len(d.Runs) > 0 {
		w.m("<table class=\"runs\">\n<caption class=\"sr-only\">Sessions you may read, latest activity first</caption>\n<thead><tr><th scope=\"col\">Session</th><th scope=\"col\">Repository</th><th scope=\"col\">State</th><th scope=\"col\">Request</th><th scope=\"col\">Events</th><th scope=\"col\">Updated</th></tr></thead>\n<tbody>\n")
		for _, r := range d.Runs {
			w.m("<tr>\n<td><a href=\"")
			w.url(runURL(r.SessionID))
			w.m("\">")
			w.text(r.SessionID)
			w.m("</a></td>\n<td>")
			if r.Repository != "" {
				w.text(r.Repository)
			} else {
				w.m("<span class=\"muted\">(local)</span>")
			}
			w.m("</td>\n<td><span class=\"state state-")
			w.text(r.State)
			w.m("\">")
			if r.State != "" {
				w.text(r.State)
			} else {
				w.m("idle")
			}
			w.m("</span>")
			if r.Pending != 0 {
				w.m(" · ")
				w.int(int64(r.Pending))
				w.m(" waiting")
			}
			w.m("</td>\n<td class=\"prompt\">")
			w.text(clip(r.Prompt, 140))
			w.m("</td>\n<td class=\"num\">")
			w.int(r.Events)
			w.m("</td>\n<td><time datetime=\"")
			w.text(r.UpdatedAt)
			w.m("\">")
			w.text(r.UpdatedAt)
			w.m("</time></td>\n</tr>")
		}
		w.m("\n</tbody>\n</table>\n")
		if d.Next != "" {
			w.m("<p><a href=\"")
			w.url("/runs?" + d.Next)
			w.m("\">Older sessions →</a></p>")
		}
		w.m("\n")
	} else {
		w.m("<p>No session you may read")
		if d.Filter.Repository != "" || d.Filter.State != "" {
			w.m(" matches these filters")
		}
		w.m(".</p>\n")
	}
	w.foot()
	return w.b
}

// runPage is /runs/:id. Its parts (status, timeline, evidence, approvals,
// cost) are also served alone by /runs/:id/parts for the live script.
func runPage(d page) []byte {
	var w htmlWriter
	s := &d.S
	w.head(d)
	w.m("\n<div id=\"run\" data-session=\"")
	w.text(s.ID)
	w.m("\" data-last-seq=\"")
	w.int(s.LastSeq)
	w.m("\" data-live=\"")
	w.bool(d.Live)
	w.m("\" data-max-rows=\"")
	w.int(int64(d.MaxRows))
	w.m("\">\n<h1>Session <code>")
	w.text(s.ID)
	w.m("</code></h1>\n<p class=\"live\" id=\"live-status\" role=\"status\" aria-live=\"polite\">")
	if d.Live {
		w.m("connecting…")
	} else {
		w.text(replayStatus(s.State))
	}
	w.m("</p>\n<section id=\"part-status\" aria-labelledby=\"h-status\">")
	w.status(d)
	w.m("</section>\n<section aria-labelledby=\"h-timeline\">\n<h2 id=\"h-timeline\">Timeline</h2>\n<div id=\"part-timeline\">")
	w.timeline(d)
	w.m("</div>\n</section>\n<section id=\"part-evidence\" aria-labelledby=\"h-evidence\">")
	w.evidence(d)
	w.m("</section>\n<section id=\"part-approvals\" aria-labelledby=\"h-approvals\">")
	w.approvals(d)
	w.m("</section>\n<section id=\"part-cost\" aria-labelledby=\"h-cost\">")
	w.cost(d)
	w.m("</section>\n<section aria-labelledby=\"h-events\">\n<h2 id=\"h-events\">Events</h2>\n")
	if s.Hidden != 0 {
		w.m("<p>The ")
		w.int(int64(s.Hidden))
		w.m(" earlier events are left out: <a href=\"")
		w.url(runURL(s.ID) + "?all=1")
		w.m("\">list every event</a> (or read the event stream).</p>")
	}
	w.m("\n<table class=\"events\">\n<caption class=\"sr-only\">Every event of the session, oldest first; open a row for its payload</caption>\n<thead><tr><th scope=\"col\">#</th><th scope=\"col\">Time</th><th scope=\"col\">Actor</th><th scope=\"col\">Type</th><th scope=\"col\">Details</th></tr></thead>\n<tbody id=\"events-body\">\n")
	for _, r := range s.Events {
		w.m("<tr id=\"ev-")
		w.int(r.Seq)
		w.m("\" data-seq=\"")
		w.int(r.Seq)
		w.m("\"")
		if r.Class != "" {
			w.m(" class=\"row-")
			w.text(r.Class)
			w.m("\"")
		}
		w.m(">\n<td class=\"num\">")
		w.int(r.Seq)
		w.m("</td><td><time datetime=\"")
		w.text(r.TS)
		w.m("\">")
		w.text(shortTime(r.TS))
		w.m("</time></td><td>")
		w.text(r.Actor)
		w.m("</td><td>")
		w.text(r.Type)
		w.m("</td>\n<td><details><summary>")
		if r.Summary != "" {
			w.text(r.Summary)
		} else {
			w.m("payload")
		}
		w.m("</summary><pre>")
		w.text(r.Body)
		w.m("</pre></details></td>\n</tr>\n")
	}
	w.m("</tbody>\n</table>\n</section>\n</div>\n\n")
	w.foot()
	return w.b
}

// shortTime is an RFC 3339 time's clock part.
func shortTime(ts string) string {
	return strings.TrimSuffix(ts[strings.IndexByte(ts, 'T')+1:], "Z")
}

// parts are the run page's parts the live script re-fetches, by the name
// it asks for (the section's id is "part-" + name).
var parts = []struct {
	name   string
	render func(*htmlWriter, page)
}{
	{"status", (*htmlWriter).status},
	{"timeline", (*htmlWriter).timeline},
	{"evidence", (*htmlWriter).evidence},
	{"approvals", (*htmlWriter).approvals},
	{"cost", (*htmlWriter).cost},
}

func (w *htmlWriter) status(d page) {
	s := &d.S
	w.m("\n<h2 id=\"h-status\" class=\"sr-only\">Status</h2>\n<dl class=\"facts\">\n<dt>State</dt><dd><span class=\"state state-")
	w.text(s.State)
	w.m("\">")
	w.text(s.State)
	w.m("</span></dd>\n")
	if s.Repo != "" {
		w.m("<dt>Repository</dt><dd>")
		w.text(s.Repo)
		w.m("</dd>")
	}
	w.m("\n<dt>Request</dt><dd class=\"prompt\">")
	w.text(clip(s.Prompt, 2000))
	w.m("</dd>\n<dt>Activity</dt><dd>")
	w.int(int64(s.LLMCalls))
	w.m(" model calls, ")
	w.int(int64(s.ToolCalls))
	w.m(" tool calls, ")
	w.int(s.LastSeq)
	w.m(" events</dd>\n")
	if s.TraceID != "" {
		w.m("<dt>Trace</dt><dd><code>")
		w.text(s.TraceID)
		w.m("</code></dd>")
	}
	w.m("\n</dl>\n")
	if t := s.Terminal; t != nil {
		w.m("\n<div class=\"report report-")
		w.text(t.Status)
		w.m("\">\n<h3>Terminal report: ")
		w.text(t.Status)
		w.m("</h3>\n<dl class=\"facts\">\n")
		if t.Reason != "" {
			w.m("<dt>Reason</dt><dd>")
			w.text(t.Reason)
			w.m("</dd>")
		}
		w.m("\n")
		if t.ErrorClass != "" {
			w.m("<dt>Error class</dt><dd>")
			w.text(t.ErrorClass)
			w.m("</dd>")
		}
		w.m("\n<dt>Next action</dt><dd>")
		w.text(t.NextAction)
		w.m("</dd>\n<dt>Trace id</dt><dd><code>")
		w.text(t.TraceID)
		w.m("</code></dd>\n<dt>Correlation id</dt><dd><code>")
		w.text(t.CorrelationID)
		w.m("</code></dd>\n</dl>\n</div>\n")
	}
	w.m("\n")
	if s.Output != "" {
		w.m("<h3>Worker's report</h3><pre class=\"output\">")
		w.text(clip(s.Output, 20000))
		w.m("</pre>")
	}
	w.m("\n")
}

func (w *htmlWriter) timeline(d page) {
	t := &d.S.Timeline
	w.m("\n")
	if len(t.Lanes) == 0 {
		w.m("<p class=\"muted\">No model or tool call yet.</p>\n")
		return
	}
	w.m("<svg class=\"timeline\" viewBox=\"0 0 ")
	w.f1(t.Width)
	w.m(" ")
	w.f1(t.Height)
	w.m("\" role=\"img\" aria-labelledby=\"tl-title\">\n<title id=\"tl-title\">Lane chart: model calls and tool calls per role over ")
	w.text(t.Duration)
	w.m("</title>\n")
	for _, k := range t.Ticks {
		w.m("<line class=\"tick\" x1=\"")
		w.f1(k.X)
		w.m("\" x2=\"")
		w.f1(k.X)
		w.m("\" y1=\"14\" y2=\"")
		w.f1(t.Height)
		w.m("\"></line><text class=\"tick-label")
		if k.End {
			w.m(" tick-end")
		}
		w.m("\" x=\"")
		w.f1(k.X)
		w.m("\" y=\"11\">")
		w.text(k.Label)
		w.m("</text>\n")
	}
	w.m("\n")
	for _, l := range t.Lanes {
		w.m("<g class=\"lane\">\n<text class=\"lane-label\" x=\"2\" y=\"")
		w.f1(l.Y + 17)
		w.m("\">")
		w.text(l.Name)
		w.m("</text>\n")
		for _, b := range l.Bars {
			w.m("<a href=\"#ev-")
			w.int(b.Seq)
			w.m("\" class=\"bar-link\"><rect class=\"bar bar-")
			w.text(b.Kind)
			w.m(" bar-")
			w.text(b.Outcome)
			w.m("\" x=\"")
			w.f1(b.X)
			w.m("\" y=\"")
			w.f1(b.Y)
			w.m("\" width=\"")
			w.f1(b.W)
			w.m("\" height=\"18\" rx=\"2\"><title>")
			w.text(b.Title)
			w.m("</title></rect>")
			if b.Label != "" {
				w.m("<text class=\"bar-label\" x=\"")
				w.f1(b.X + 3)
				w.m("\" y=\"")
				w.f1(b.Y + 13)
				w.m("\">")
				w.text(b.Label)
				w.m("</text>")
			}
			if b.Outcome == "fail" {
				w.m("<text class=\"bar-mark\" x=\"")
				w.f1(b.X + b.W)
				w.m("\" y=\"")
				w.f1(b.Y + 13)
				w.m("\">✕</text>")
			}
			w.m("</a>\n")
		}
		w.m("</g>\n")
	}
	w.m("</svg>\n<p class=\"legend\"><span class=\"key key-llm\"></span> model call · <span class=\"key key-tool\"></span> tool call · <span class=\"key key-fail\"></span> failed (also marked ✕) · <span class=\"key key-running\"></span> still running. Bars link to their event.</p>\n")
}

// diff writes a diff's lines as block spans inside a pre.
func (w *htmlWriter) diff(lines []DiffLine) {
	for _, l := range lines {
		w.m("<span class=\"d-")
		w.text(l.Kind)
		w.m("\">")
		w.text(l.Text)
		w.m("</span>")
	}
}

func (w *htmlWriter) approvals(d page) {
	s := &d.S
	w.m("\n<h2 id=\"h-approvals\">Approvals</h2>\n")
	if len(s.Pending) == 0 {
		w.m("<p class=\"muted\">Nothing is waiting for an answer.</p>")
	}
	for _, p := range s.Pending {
		w.m("<article class=\"approval\" aria-label=\"Pending approval ")
		w.text(p.ID)
		w.m("\">\n<h3>")
		w.text(p.Tool)
		w.m(" <code>")
		w.text(p.ID)
		w.m("</code> is waiting</h3>\n<dl class=\"facts\"><dt>Digest</dt><dd><code>")
		w.text(p.Digest)
		w.m("</code></dd>")
		if p.Head != "" {
			w.m("<dt>Head</dt><dd><code>")
			w.text(p.Head)
			w.m("</code></dd>")
		}
		w.m("</dl>\n")
		if p.Summary != "" {
			w.m("<p>")
			w.text(p.Summary)
			w.m("</p>")
		}
		w.m("\n")
		if p.Command != "" {
			w.m("<pre class=\"command\">")
			w.text(p.Command)
			w.m("</pre>")
		}
		w.m("\n")
		if p.Cut {
			w.m("<p class=\"muted\">The kernel cut this diff; the call's arguments (the event's payload) hold the whole change.</p>")
		}
		w.m("\n")
		if len(p.Diff) > 0 {
			w.m("<pre class=\"diff\" aria-label=\"Proposed diff\">")
			w.diff(p.Diff)
			w.m("</pre>")
		}
		w.m("\n")
		if len(p.Split) > 0 {
			w.m("<table class=\"diff-split\" aria-label=\"Proposed diff, side by side\"><thead><tr><th scope=\"col\">Before</th><th scope=\"col\">After</th></tr></thead><tbody>\n")
			for _, r := range p.Split {
				if r.Kind != "" {
					w.m("<tr class=\"d-")
					w.text(r.Kind)
					w.m("\"><td colspan=\"2\">")
					w.text(r.Left.Text)
					w.m("</td></tr>\n")
					continue
				}
				w.m("<tr><td class=\"d-")
				w.text(r.Left.Kind)
				w.m("\">")
				if r.Left.Kind == "del" {
					w.m("<span class=\"sr-only\">removed: </span>")
				}
				w.text(r.Left.Text)
				w.m("</td><td class=\"d-")
				w.text(r.Right.Kind)
				w.m("\">")
				if r.Right.Kind == "add" {
					w.m("<span class=\"sr-only\">added: </span>")
				}
				w.text(r.Right.Text)
				w.m("</td></tr>\n")
			}
			w.m("</tbody></table>")
		}
		w.m("\n")
		switch {
		case d.CanApprove:
			w.m("\n<form method=\"post\" action=\"")
			w.url(runURL(s.ID) + "/approvals/" + url.PathEscape(p.ID))
			w.m("\" class=\"answer\">\n<input type=\"hidden\" name=\"csrf\" value=\"")
			w.text(d.CSRF)
			w.m("\">\n<input type=\"hidden\" name=\"digest\" value=\"")
			w.text(p.Digest)
			w.m("\">\n<input type=\"hidden\" name=\"head\" value=\"")
			w.text(p.Head)
			w.m("\">\n<label for=\"reason-")
			w.text(p.ID)
			w.m("\">Reason (for a denial)</label>\n<input id=\"reason-")
			w.text(p.ID)
			w.m("\" name=\"reason\" maxlength=\"500\">\n<button type=\"submit\" name=\"decision\" value=\"approve\" class=\"approve\">Approve</button>\n<button type=\"submit\" name=\"decision\" value=\"deny\" class=\"deny\">Deny</button>\n</form>\n")
		case !d.ReadOnly:
			w.m("<p class=\"muted\">Answering needs write access to the repository")
			if d.Login == "" {
				w.m(": sign in with GitHub")
			}
			w.m(".</p>")
		}
		w.m("\n</article>\n")
	}
	w.m("\n")
	if len(s.Resolved) > 0 {
		w.m("<h3>Answered</h3>\n")
		for _, r := range s.Resolved {
			w.m("<article class=\"approval approval-answered\" id=\"answered-")
			w.text(r.ID)
			w.m("\" aria-label=\"Answered approval ")
			w.text(r.ID)
			w.m("\">\n<h4>")
			w.text(r.Tool)
			w.m(" <code>")
			w.text(r.ID)
			w.m("</code>: <strong class=\"decision decision-")
			w.text(r.Decision)
			w.m("\">")
			w.text(r.Decision)
			w.m("</strong> by ")
			w.text(r.By)
			if r.Reason != "" {
				w.m(" (")
				w.text(r.Reason)
				w.m(")")
			}
			w.m("</h4>\n<dl class=\"facts\"><dt>Digest</dt><dd><code>")
			w.text(r.Digest)
			w.m("</code></dd><dt>Events</dt><dd><a href=\"#ev-")
			w.int(r.Seq)
			w.m("\">requested #")
			w.int(r.Seq)
			w.m("</a>")
			if r.ResolvedSeq != 0 {
				w.m(", <a href=\"#ev-")
				w.int(r.ResolvedSeq)
				w.m("\">answered #")
				w.int(r.ResolvedSeq)
				w.m("</a>")
			}
			w.m("</dd></dl>\n")
			if r.Summary != "" {
				w.m("<p>")
				w.text(r.Summary)
				w.m("</p>")
			}
			w.m("\n")
			if r.Command != "" {
				w.m("<pre class=\"command\" aria-label=\"The command that was ")
				w.text(r.Decision)
				w.m("d\">")
				w.text(r.Command)
				w.m("</pre>")
			}
			w.m("\n")
			switch {
			case len(r.Diff) > 0:
				w.m("<pre class=\"diff\" aria-label=\"The diff that was answered ")
				w.text(r.Decision)
				w.m("\">")
				w.diff(r.Diff)
				w.m("</pre>")
			case r.Command == "":
				w.m("<p class=\"muted\">The approval showed no diff or command.</p>")
			}
			w.m("\n</article>\n")
		}
	}
	w.m("\n")
}

func (w *htmlWriter) evidence(d page) {
	e := &d.S.Evidence
	w.m("\n<h2 id=\"h-evidence\">Evidence</h2>\n<p class=\"muted\">Read from the tools' results, the approvals and the review events of this log, not from the models' words.</p>\n<h3 id=\"h-commands\">Commands</h3>\n")
	if len(e.Commands) > 0 {
		w.m("<table class=\"evidence commands\" aria-labelledby=\"h-commands\">\n<thead><tr><th scope=\"col\">#</th><th scope=\"col\">Tool</th><th scope=\"col\">Command</th><th scope=\"col\">Exit code</th><th scope=\"col\">Result</th></tr></thead>\n<tbody>")
		for _, c := range e.Commands {
			w.m("<tr class=\"cmd-")
			w.text(c.Class())
			w.m("\" data-call=\"")
			w.text(c.CallID)
			w.m("\"><td class=\"num\"><a href=\"#ev-")
			w.int(c.Seq)
			w.m("\">")
			w.int(c.Seq)
			w.m("</a></td><td>")
			w.text(c.Tool)
			w.m("</td><td><code>")
			if c.Command != "" {
				w.text(c.Command)
			} else {
				w.m("(default)")
			}
			w.m("</code></td><td class=\"num exit\">")
			if c.Exit != "" {
				w.text(c.Exit)
			} else {
				w.m("—")
			}
			w.m("</td><td class=\"outcome\"><strong>")
			w.text(c.Outcome)
			w.m("</strong>")
			if c.Detail != "" {
				w.m(" (")
				w.text(c.Detail)
				w.m(")")
			}
			w.m("</td></tr>\n")
		}
		w.m("</tbody></table>\n")
	} else {
		w.m("<p class=\"muted\">No command was run (no test.run, lint.run or process.run).</p>\n")
	}
	w.m("<h3 id=\"h-files\">Changed files</h3>\n")
	if len(e.Files) > 0 {
		w.m("<table class=\"evidence files\" aria-labelledby=\"h-files\">\n<thead><tr><th scope=\"col\">File</th><th scope=\"col\">Change</th><th scope=\"col\">Lines</th><th scope=\"col\">Calls</th></tr></thead>\n<tbody>")
		for _, f := range e.Files {
			w.m("<tr><td><code>")
			w.text(f.Path)
			w.m("</code></td><td>")
			w.text(f.Op)
			if f.FromApprovedCall {
				w.m(" (approved)")
			}
			w.m("</td><td class=\"num\">")
			if f.LinesKnown {
				w.m("+")
				w.int(int64(f.Added))
				w.m(" −")
				w.int(int64(f.Removed))
			} else {
				w.m("not recorded")
			}
			w.m("</td><td class=\"num\">")
			w.int(int64(f.Calls))
			w.m("</td></tr>\n")
		}
		w.m("</tbody></table>\n<h3 id=\"h-diff\">Final diff</h3>\n<p class=\"muted\">The applied changes in order (")
		w.int(int64(len(e.Changes)))
		if len(e.Changes) == 1 {
			w.m(" call).</p>\n")
		} else {
			w.m(" calls).</p>\n")
		}
		w.m("<pre class=\"diff final-diff\" aria-labelledby=\"h-diff\">")
		w.diff(e.Diff)
		w.m("</pre>\n")
	} else {
		w.m("<p class=\"muted\">No file was changed (no successful repo.write or repo.patch).</p>\n")
	}
	w.m("<h3 id=\"h-review\">Review</h3>\n")
	r := e.Review
	if r == nil {
		w.m("<p class=\"muted\">No review was recorded.</p>\n")
		return
	}
	w.m("<dl class=\"facts review\">\n")
	if r.Verdict != "" {
		w.m("<dt>Reviewer's verdict</dt><dd><strong class=\"verdict verdict-")
		w.text(r.Verdict)
		w.m("\">")
		w.text(r.Verdict)
		w.m("</strong> (<a href=\"#ev-")
		w.int(r.Seq)
		w.m("\">event ")
		w.int(r.Seq)
		w.m("</a>)</dd>")
	}
	w.m("\n")
	if r.HasAgg {
		w.m("<dt>Reviewer personas' verdict</dt><dd><strong class=\"verdict verdict-")
		w.text(r.Aggregate)
		w.m("\">")
		w.text(r.Aggregate)
		w.m("</strong>, coverage ")
		w.text(strconv.FormatFloat(r.Coverage*100, 'f', 0, 64) + "%")
		w.m("</dd>")
	}
	w.m("\n")
	if r.Cycle != "" {
		w.m("<dt>Workflow verdict</dt><dd>")
		w.text(r.Cycle)
		w.m("</dd>")
	}
	w.m("\n</dl>\n")
	if len(r.Personas) > 0 {
		w.m("<table class=\"evidence personas\"><caption>Reviewer personas</caption>\n<thead><tr><th scope=\"col\">Persona</th><th scope=\"col\">Phase</th><th scope=\"col\">Outcome</th><th scope=\"col\">Findings</th></tr></thead>\n<tbody>")
		for _, p := range r.Personas {
			w.m("<tr class=\"persona-")
			w.text(p.Status)
			w.m("\"><td>")
			w.text(p.Persona)
			w.m("</td><td>")
			w.text(p.Phase)
			w.m("</td><td>")
			if p.Reviewed() {
				w.m("reviewed")
			} else {
				w.m("<strong>not reviewed: ")
				w.text(p.Status)
				w.m("</strong>")
				if p.Reason != "" {
					w.m(" (")
					w.text(p.Reason)
					w.m(")")
				}
			}
			w.m("</td><td class=\"num\">")
			if p.Reviewed() {
				w.int(int64(p.Findings))
			} else {
				w.m("—")
			}
			w.m("</td></tr>\n")
		}
		w.m("</tbody></table>\n")
		if n := len(r.NotReviewed()); n > 0 {
			w.m("<p class=\"review-incomplete\"><strong>The review is incomplete:</strong> ")
			w.int(int64(n))
			if n == 1 {
				w.m(" persona did not review.</p>")
			} else {
				w.m(" personas did not review.</p>")
			}
		}
	}
	w.m("\n")
}

func (w *htmlWriter) cost(d page) {
	c := &d.S.Costs
	w.m("\n<h2 id=\"h-cost\">Tokens and cost</h2>\n")
	if len(c.Roles) == 0 {
		w.m("<p class=\"muted\">No model call yet.</p>\n")
		return
	}
	w.m("\n<svg class=\"cost\" viewBox=\"0 0 520 ")
	w.f1(c.Chart.Height)
	w.m("\" role=\"img\" aria-labelledby=\"cost-title\">\n<title id=\"cost-title\">")
	w.text(c.Chart.Unit)
	w.m(" per role</title>\n")
	for _, b := range c.Chart.Bars {
		w.m("<text x=\"0\" y=\"")
		w.f1(b.Y + 15)
		w.m("\" class=\"lane-label\">")
		w.text(b.Label)
		w.m("</text><rect class=\"bar bar-llm\" x=\"110\" y=\"")
		w.f1(b.Y + 3)
		w.m("\" width=\"")
		w.f1(b.W)
		w.m("\" height=\"16\"></rect><text x=\"")
		w.f1(b.W + 116)
		w.m("\" y=\"")
		w.f1(b.Y + 15)
		w.m("\" class=\"bar-value\">")
		w.text(b.Value)
		w.m("</text>\n")
	}
	if b := c.Chart.Budget; b != nil {
		w.m("<line class=\"budget-line")
		if b.Over {
			w.m(" budget-over")
		}
		w.m("\" x1=\"")
		w.f1(b.X)
		w.m("\" x2=\"")
		w.f1(b.X)
		w.m("\" y1=\"0\" y2=\"")
		w.f1(b.TotalY + 24)
		w.m("\"></line><text class=\"budget-label\" x=\"")
		w.f1(b.X)
		w.m("\" y=\"")
		w.f1(b.TotalY + 36)
		w.m("\">")
		w.text(b.Label)
		w.m("</text>\n")
	}
	w.m("</svg>\n")
	if b := c.Chart.Budget; b != nil {
		w.m("<p class=\"budget")
		if b.Over {
			w.m(" budget-over")
		}
		w.m("\">Budget: ")
		w.text(b.Text)
		w.m(".</p>")
	}
	w.m("\n")
	w.costTable("Per role", "Role", c.Roles)
	w.m("\n")
	w.costTable("Per model", "Model", c.Models)
	u := &d.S.Usage
	w.m("\n<p class=\"cost-total\">Total: ")
	w.int(u.InputTokens)
	w.m(" input + ")
	w.int(u.OutputTokens)
	w.m(" output tokens")
	if u.CachedInputTokens != 0 {
		w.m(" (")
		w.int(u.CachedInputTokens)
		w.m(" cached input tokens)")
	}
	w.m("; ")
	w.text(c.TotalText())
	w.m(".</p>\n")
}

// costTable is a table of tokens and cost per role or per model; caption
// and column name the table.
func (w *htmlWriter) costTable(caption, column string, rows []CostBar) {
	w.m("<table class=\"costs\"><caption>")
	w.text(caption)
	w.m("</caption>\n<thead><tr><th scope=\"col\">")
	w.text(column)
	w.m("</th><th scope=\"col\">Calls</th><th scope=\"col\">Input tokens</th><th scope=\"col\">Output tokens</th><th scope=\"col\">Cost</th></tr></thead>\n<tbody>")
	for _, r := range rows {
		w.m("<tr><td>")
		w.text(r.Name)
		w.m("</td><td class=\"num\">")
		w.int(int64(r.Calls))
		w.m("</td><td class=\"num\">")
		w.int(r.InputTokens)
		w.m("</td><td class=\"num\">")
		w.int(r.OutputTokens)
		w.m("</td><td class=\"num\">")
		w.text(r.Cost())
		w.m("</td></tr>")
	}
	w.m("</tbody></table>")
}

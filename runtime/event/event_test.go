package event

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentos/agentos/kernel/redact"
	"github.com/agentos/agentos/schemas"
)

func newSealer(t testing.TB) *Sealer {
	t.Helper()
	s, err := NewSealer(schemas.MustDefault(), redact.New(nil), func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC) })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestChainAndLineHash(t *testing.T) {
	s := newSealer(t)
	ps, err := s.PrepareAll("sess-1", []Draft{
		{RunID: "r", Type: SessionStart, Actor: "user", Payload: map[string]any{"prompt": "hi <b>&"}},
		{RunID: "r", Type: OutputDelta, Actor: "worker", Payload: json.RawMessage(`{ "text" : "x\u00e9" , "role":"worker"}`), ParentID: "p1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	evs := s.Chain(Tip{}, ps)
	if evs[0].Seq != 1 || evs[1].Seq != 2 || evs[0].PrevHash != "" || evs[1].PrevHash != evs[0].Hash {
		t.Fatalf("chain: %+v", evs)
	}
	if evs[0].TS != "2026-01-02T03:04:05.000006Z" {
		t.Errorf("ts = %s", evs[0].TS)
	}
	if got := string(evs[1].Payload); got != `{"role":"worker","text":"xé"}` {
		t.Errorf("payload not canonical: %s", got)
	}
	if !strings.Contains(string(evs[0].Line()), `"hi <b>&"`) {
		t.Errorf("HTML escaped: %s", evs[0].Line())
	}
	for _, e := range evs {
		line := e.Line()
		if _, err := CheckLineHash(line); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		back, err := ParseLine(line)
		if err != nil || string(back.Line()) != string(line) {
			t.Fatalf("round trip: %v\n%s\n%s", err, line, back.Line())
		}
		bad := []byte(strings.Replace(string(line), `"actor":"`, `"actor":"x`, 1))
		if _, err := CheckLineHash(bad); err == nil {
			t.Fatal("edited line passed CheckLineHash")
		}
	}
	if evs[0].ID >= evs[1].ID {
		t.Errorf("ids not increasing: %s %s", evs[0].ID, evs[1].ID)
	}
}

func TestPrepareFailsClosed(t *testing.T) {
	s := newSealer(t)
	cases := []struct {
		name    string
		session string
		d       Draft
		ptr     string
	}{
		{"unknown type", "s", Draft{Type: "tool.call", Actor: "a", Payload: map[string]any{}}, "/type"},
		{"missing actor", "s", Draft{Type: SessionStart, Payload: map[string]any{"prompt": "x"}}, "/actor"},
		{"bad payload", "s", Draft{Type: ToolInvoke, Actor: "w", Payload: map[string]any{"call_id": "c", "tool": "t", "args": "notobject"}}, "/args"},
		{"payload not JSON", "s", Draft{Type: SessionStart, Actor: "u", Payload: json.RawMessage(`{"prompt":`)}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ps, err := s.PrepareAll(c.session, []Draft{{Type: SessionStart, Actor: "u", Payload: map[string]any{"prompt": "ok"}}, c.d})
			var sv *SchemaViolationError
			if !errors.As(err, &sv) {
				t.Fatalf("got %v, want SchemaViolationError", err)
			}
			if sv.Pointer != c.ptr {
				t.Errorf("pointer %q, want %q (%v)", sv.Pointer, c.ptr, sv)
			}
			if len(ps) != 1 || ps[0].Type != SchemaViolation {
				t.Fatalf("want a single schema.violation instead of the batch, got %+v", ps)
			}
		})
	}
	if _, err := s.Prepare("../etc", Draft{Type: SessionStart, Actor: "u", Payload: map[string]any{"prompt": "x"}}); !errors.Is(err, ErrInvalidSession) {
		t.Errorf("traversal session id: %v", err)
	}
}

func TestValidSessionID(t *testing.T) {
	for id, want := range map[string]bool{
		"sess-1": true, "o_r.42-abc": true, "": false, ".hidden": false, "-x": false, "a..b": false,
		"a/b": false, "a\x00b": false, strings.Repeat("a", 128): true, strings.Repeat("a", 129): false,
	} {
		if got := ValidSessionID(id); got != want {
			t.Errorf("ValidSessionID(%q) = %v, want %v", id, got, want)
		}
	}
}

func TestRedactedBeforeSealing(t *testing.T) {
	s := newSealer(t)
	tok := "ghs_" + strings.Repeat("A1b2", 9)
	p, err := s.Prepare("s", Draft{Type: OutputMessage, Actor: "worker", RunID: "r " + tok, Payload: map[string]any{"text": "token " + tok, "role": "GITHUB_TOKEN=abcdef123"}})
	if err != nil {
		t.Fatal(err)
	}
	all := string(p.Payload) + p.RunID
	if strings.Contains(all, tok) || strings.Contains(all, "abcdef123") {
		t.Fatalf("secret survived: %s", all)
	}
}

func TestField(t *testing.T) {
	obj := []byte(`{"a":"x\"y","b":{"c":[1,"}",{"d":2}],"e":-1.5e3},"f":true,"g":null,"h":"é", "i" : 42 }`)
	if got := FieldString(obj, "a"); got != `x"y` {
		t.Errorf("a = %q", got)
	}
	if got := FieldFloat(Field(obj, "b"), "e"); got != -1500 {
		t.Errorf("b.e = %v", got)
	}
	if got := string(Field(Field(obj, "b"), "c")); got != `[1,"}",{"d":2}]` {
		t.Errorf("b.c = %s", got)
	}
	if !FieldBool(obj, "f") || FieldString(obj, "h") != "é" || FieldInt(obj, "i") != 42 {
		t.Errorf("f/h/i wrong")
	}
	for _, bad := range []string{``, `[]`, `{"a":`, `{"a" 1}`, `"str"`} {
		if Field([]byte(bad), "a") != nil {
			t.Errorf("Field(%q) not nil", bad)
		}
	}
	if Field(obj, "zz") != nil || Field(nil, "a") != nil {
		t.Error("absent field not nil")
	}
}

// TestValidSessionIDMatchesPattern: the hand-written check accepts exactly
// what the documented pattern does (and rejects "..").
func TestValidSessionIDMatchesPattern(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	cases := []string{"", "a", "A9", "run-1.2_x", ".a", "-a", "_a", "a..b", "a.b", "é", "a b", "a/b", "a\x00", strings.Repeat("a", 128), strings.Repeat("a", 129)}
	for c := byte(0); c < 255; c++ {
		cases = append(cases, string([]byte{c}), "a"+string([]byte{c}), string([]byte{c})+"a")
	}
	for _, id := range cases {
		want := re.MatchString(id) && !strings.Contains(id, "..")
		if got := ValidSessionID(id); got != want {
			t.Errorf("ValidSessionID(%q) = %v, want %v", id, got, want)
		}
	}
}

// TestChainLinesMatchesChain: the one-pass seal gives the events Chain
// gives, and each line is the event's Line with a hash that checks.
func TestChainLinesMatchesChain(t *testing.T) {
	s := newSealer(t)
	var ps []Prepared
	for _, text := range []string{"one", "two \u2028 <three>", "four"} {
		p, err := s.Prepare("s", Draft{RunID: "r", Type: OutputMessage, Actor: "worker", Payload: map[string]any{"text": text}})
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	tip := Tip{Seq: 4, Hash: strings.Repeat("a", 64)}
	evs, lines := s.ChainLines(tip, ps)
	for i, e := range evs {
		if e.Hash != e.ComputeHash() || string(lines[i]) != string(e.Line()) {
			t.Fatalf("event %d: hash %s (recomputed %s), line %s vs %s", i, e.Hash, e.ComputeHash(), lines[i], e.Line())
		}
		if h, err := CheckLineHash(lines[i]); err != nil || h != e.Hash {
			t.Fatalf("line %d: %v", i, err)
		}
		prev := tip.Hash
		if i > 0 {
			prev = evs[i-1].Hash
		}
		if e.Seq != tip.Seq+int64(i)+1 || e.PrevHash != prev {
			t.Fatalf("event %d: seq %d prev %s", i, e.Seq, e.PrevHash)
		}
	}
}

func TestLineSizeIsExactWithoutEscapes(t *testing.T) {
	pid := "01J00000000000000000000000"
	for _, e := range []Event{
		{ID: "01J0000000000000000000000A", SessionID: "s-1", RunID: "r", Seq: 1, TS: "2026-11-23T00:00:00.000000000Z", Type: ToolInvoke, Actor: "worker", Payload: []byte(`{"a":1}`), SchemaVersion: SchemaVersion},
		{ID: "x", SessionID: "s", Seq: 1<<63 - 1, Type: ToolResult, Actor: "a", Payload: []byte(`{}`), SchemaVersion: SchemaVersion, ParentID: &pid, PrevHash: strings.Repeat("a", 64), Hash: strings.Repeat("b", 64)},
	} {
		e.Hash = strings.Repeat("c", 64)
		line := e.Line()
		if len(line) > e.lineSize() {
			t.Errorf("line of %d bytes, lineSize %d: %s", len(line), e.lineSize(), line)
		}
		if e.lineSize()-len(line) > 20 {
			t.Errorf("lineSize %d overestimates a %d-byte line by more than the seq's width", e.lineSize(), len(line))
		}
	}
}

func TestFormatTSMatchesLayout(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	times := []time.Time{time.Unix(0, 0), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), time.Now(), time.Now().In(time.FixedZone("x", -7*3600))}
	for i := 0; i < 20000; i++ {
		times = append(times, time.Unix(rng.Int64N(400*365*86400)-100*365*86400, rng.Int64N(1e9)))
	}
	for _, tm := range times {
		if got, want := formatTS(tm), tm.UTC().Format(TimeFormat); got != want {
			t.Fatalf("formatTS(%v) = %q, want %q", tm, got, want)
		}
	}
}

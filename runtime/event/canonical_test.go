package event

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// TestAppendCanonicalMatchesEncodingJSON: the sealer's fast encoder must
// write exactly the bytes marshalCanonical (encoding/json, keys sorted, no
// HTML escaping) writes, or hashes of the same payload would depend on
// which path encoded it. Random decoded values with awkward strings
// (escapes, HTML, control and non-ASCII characters, U+2028) and numbers.
func TestAppendCanonicalMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 5000; i++ {
		v := randomValue(rng, 0)
		want, err := marshalCanonical(v)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendCanonical(nil, v)
		if !ok {
			t.Fatalf("appendCanonical refused %#v", v)
		}
		if string(got) != string(want) {
			t.Fatalf("value %#v:\n got %s\nwant %s", v, got, want)
		}
	}
}

func TestAppendCanonicalRefusesBadNumbers(t *testing.T) {
	for _, n := range []string{"", "01", "1.", ".5", "1e", "+1", "NaN", "0x10", "1 "} {
		if _, ok := appendCanonical(nil, map[string]any{"n": json.Number(n)}); ok {
			t.Errorf("json.Number(%q) accepted", n)
		}
	}
	for _, n := range []string{"0", "-0", "12", "-1.5e+10", "3E-2", "0.001"} {
		if b, ok := appendCanonical(nil, json.Number(n)); !ok || string(b) != n {
			t.Errorf("json.Number(%q): %s %v", n, b, ok)
		}
	}
}

func FuzzAppendCanonicalString(f *testing.F) {
	for _, s := range []string{"", "a", `"\`, "<a&b>", "\u2028\u2029", "\x00\x1f", "é漢字🙂"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := map[string]any{s: []any{s, json.Number("1")}}
		want, err := marshalCanonical(v)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendCanonical(nil, v)
		if !ok || string(got) != string(want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	})
}

var awkward = []string{"", "plain", `quote " and \ backslash`, "<html> & stuff", "tab\tnewline\n", "\x00\x01\x1f", "é", "漢字", "🙂", "\u2028\u2029", "\x7f", "a\u00a0b"}

func randomValue(rng *rand.Rand, depth int) any {
	k := rng.IntN(7)
	if depth > 3 {
		k = rng.IntN(4)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return rng.IntN(2) == 0
	case 2:
		return awkward[rng.IntN(len(awkward))] + strconv.Itoa(rng.IntN(3))
	case 3:
		return json.Number(strconv.FormatInt(rng.Int64()-rng.Int64(), 10))
	case 4:
		a := make([]any, rng.IntN(4))
		for i := range a {
			a[i] = randomValue(rng, depth+1)
		}
		return a
	default:
		m := map[string]any{}
		for n := rng.IntN(20); n > 0; n-- {
			m[awkward[rng.IntN(len(awkward))]+strconv.Itoa(rng.IntN(30))] = randomValue(rng, depth+1)
		}
		return m
	}
}

// TestRedactPayloadPathsAgree: a plain Go payload (redacted while it is
// copied, encoded by appendCanonical) and the same payload as JSON bytes
// (decoded, redacted, encoded by encoding/json) must store the same bytes,
// secrets included: GitHub tokens, bearer tokens, env-style secret names
// with object and non-object values, literals, secrets in keys.
func TestRedactPayloadPathsAgree(t *testing.T) {
	s := newSealer(t)
	s.Redactor().AddLiteral("hunter2-literal")
	secrets := []string{"ghp_" + strings.Repeat("a", 36), "Bearer abcdefghijkl", "sk-" + strings.Repeat("Z", 20), "AKIA" + strings.Repeat("B", 16), "GITHUB_TOKEN=xyz123", "hunter2-literal", "plain", "API_KEY: 'v'"}
	names := []string{"GITHUB_TOKEN", "MY_SECRET", "token", "path", "API_KEY", "ghp_" + strings.Repeat("k", 36)}
	rng := rand.New(rand.NewPCG(5, 6))
	var gen func(depth int) any
	gen = func(depth int) any {
		switch k := rng.IntN(9); {
		case k == 0 || depth > 3:
			return secrets[rng.IntN(len(secrets))]
		case k == 1:
			return rng.IntN(1000)
		case k == 2:
			return []any{gen(depth + 1), gen(depth + 1)}
		case k == 6:
			ss := []string{}
			for n := rng.IntN(3); n > 0; n-- {
				ss = append(ss, secrets[rng.IntN(len(secrets))])
			}
			return ss
		case k == 7:
			return []int{rng.IntN(300), -rng.IntN(5)}
		case k == 8:
			return []string(nil)
		default:
			m := map[string]any{}
			for n := rng.IntN(4); n > 0; n-- {
				m[names[rng.IntN(len(names))]] = gen(depth + 1)
			}
			return m
		}
	}
	for i := 0; i < 3000; i++ {
		v := map[string]any{"x": gen(0)}
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		fast, val, err := s.redactPayload(v)
		if err != nil || val == nil {
			t.Fatalf("fast path not taken for %#v: %v", v, err)
		}
		slow, _, err := s.redactPayload(json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		if string(fast) != string(slow) {
			t.Fatalf("%s:\nfast %s\nslow %s", raw, fast, slow)
		}
		for _, sec := range []string{"aaaaaaaaaa", "hunter2", "abcdefghijkl", "xyz123", "ZZZZZZZZ", "BBBBBBBB", "kkkkkkkk"} {
			if strings.Contains(string(fast), sec) {
				t.Fatalf("secret %q survived: %s", sec, fast)
			}
		}
	}
}

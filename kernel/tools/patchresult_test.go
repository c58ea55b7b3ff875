package tools

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// repo.patch's result names, for every file it wrote, the SHA-256 of the
// content it left (what the bot checks before it commits the file), and
// none for a deletion; the result passes the tool's output schema, which
// refuses a malformed hash.
func TestPatchResultHashes(t *testing.T) {
	tl, dir := tree(t, map[string]string{"a.txt": "one\ntwo\n", "b.txt": "x\ny\n", "gone.txt": "bye\n"})
	d := tl.patchTool()
	diff := "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n" +
		"diff --git a/c.txt b/c.txt\nnew file mode 100644\n--- /dev/null\n+++ b/c.txt\n@@ -0,0 +1 @@\n+new\n" +
		"diff --git a/b.txt b/d.txt\nrename from b.txt\nrename to d.txt\n" +
		"diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\n--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"
	args, _ := json.Marshal(map[string]string{"unifiedDiff": diff})
	res, err := d.Handler(t.Context(), env, args)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(res)
	var out struct {
		Files []struct {
			Path    string  `json:"path"`
			OldPath string  `json:"old_path"`
			Op      string  `json:"op"`
			Hash    *string `json:"hash"`
		} `json:"files"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range out.Files {
		switch {
		case f.Op == "delete" && f.Hash != nil:
			t.Errorf("deletion of %s has a hash %q", f.Path, *f.Hash)
		case f.Op == "delete":
			got[f.Path] = ""
		case f.Hash == nil:
			t.Errorf("%s (%s) has no hash", f.Path, f.Op)
		default:
			got[f.Path] = *f.Hash
		}
	}
	for _, p := range []string{"a.txt", "c.txt", "d.txt"} {
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if got[p] != Sha256Hex(b) {
			t.Errorf("%s: hash %q, want the sha256 of its content %s", p, got[p], Sha256Hex(b))
		}
	}
	if h, ok := got["gone.txt"]; !ok || h != "" {
		t.Errorf("gone.txt: %q, %v; want a deletion without hash", h, ok)
	}
	if len(got) != 4 {
		t.Errorf("files = %s", raw)
	}

	schema := compileOutput(t, d.Output)
	var inst any
	json.Unmarshal(raw, &inst)
	if err := schema.Validate(inst); err != nil {
		t.Errorf("result does not pass the output schema: %v", err)
	}
	bad, _ := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(`{"files":[{"path":"a.txt","op":"modify","hash":"XYZ"}],"lines_added":0,"lines_removed":0}`)))
	if err := schema.Validate(bad); err == nil {
		t.Error("the output schema takes a malformed hash")
	}
}

func compileOutput(t *testing.T, doc json.RawMessage) *jsonschema.Schema {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("mem:///out.json", v); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("mem:///out.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

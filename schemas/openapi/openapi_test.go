package openapi

import (
	"encoding/json"
	"testing"
)

func TestRewriteNullable(t *testing.T) {
	var doc any
	if err := json.Unmarshal([]byte(`{"properties":{
		"a":{"type":"string","nullable":true},
		"b":{"enum":["x"],"type":"string","nullable":true},
		"c":{"$ref":"#/components/schemas/C","nullable":true},
		"d":{"type":"integer","nullable":false},
		"e":{"items":[{"type":"boolean","nullable":true}]}}}`), &doc); err != nil {
		t.Fatal(err)
	}
	RewriteNullable(doc)
	got, _ := json.Marshal(doc)
	want := `{"properties":{"a":{"type":["string","null"]},"b":{"enum":["x",null],"type":["string","null"]},"c":{"anyOf":[{"$ref":"#/components/schemas/C"},{"type":"null"}]},"d":{"type":"integer"},"e":{"items":[{"type":["boolean","null"]}]}}}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

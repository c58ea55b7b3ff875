package fakegithub

import (
	"fmt"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// uncheckedPath is what Spec.Path reports for the route-table spec.
const uncheckedPath = "(unchecked: the fake's route table, no OpenAPI description)"

// NewUnchecked returns an empty fake that matches requests against its own
// route table instead of GitHub's OpenAPI description, and accepts any JSON
// body. It exists for programs that must run without the npm corpus
// (`agentos demo --github`); the behaviour copied from GitHub (tokens,
// permissions, self-approval, "No commits between", body limits) is the
// same as New's.
//
// Tests must use New: only the OpenAPI check keeps the fake, and the client
// talking to it, from drifting away from the real API. Under NewUnchecked a
// request to a route the fake does not implement is still answered 404 and
// reported by Violations, but a body with wrong or unknown fields (for
// example "draft" on PATCH /pulls/{n}) is not.
func NewUnchecked() (*Fake, error) {
	s, err := routeSpec()
	if err != nil {
		return nil, err
	}
	return NewWithSpec(s), nil
}

// routeSpec builds a Spec holding one operation per route of the fake.
// Path parameters named like GitHub's numeric ones (…_number, …_id) are
// typed integer so that matching prefers the same operation the real
// description would (TestUncheckedMatchesSpec checks this against it).
func routeSpec() (*Spec, error) {
	const anyBody = "/any"
	c := jsonschema.NewCompiler()
	if err := c.AddResource(specURL, map[string]any{"any": map[string]any{}}); err != nil {
		return nil, fmt.Errorf("fakegithub: unchecked spec: %w", err)
	}
	sch, err := c.Compile(specURL + "#" + anyBody)
	if err != nil {
		return nil, fmt.Errorf("fakegithub: unchecked spec: %w", err)
	}
	s := &Spec{
		path:     uncheckedPath,
		ops:      map[string][]*Operation{},
		compiler: c,
		compiled: map[string]*jsonschema.Schema{anyBody: sch},
		compErr:  map[string]error{},
	}
	for _, k := range RouteKeys() {
		method, tmpl, _ := strings.Cut(k, " ")
		op := &Operation{Method: method, Path: tmpl, OperationID: "fake " + k, segments: splitPath(tmpl), pathParams: map[string]string{}, bodyPointer: anyBody}
		for _, seg := range op.segments {
			if !isParam(seg) {
				op.literals++
				continue
			}
			name := seg[1 : len(seg)-1]
			typ := "string"
			if strings.HasSuffix(name, "_number") || strings.HasSuffix(name, "_id") {
				typ = "integer"
			}
			op.pathParams[name] = typ
		}
		s.ops[method] = append(s.ops[method], op)
	}
	for _, ops := range s.ops {
		sort.Slice(ops, func(i, j int) bool { return ops[i].Path < ops[j].Path })
	}
	return s, nil
}

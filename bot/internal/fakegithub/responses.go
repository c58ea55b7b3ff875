package fakegithub

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Response checking: the fake's own answers are validated against the
// same OpenAPI description as the requests, so a client is tested against
// what GitHub sends, not what the fake's author remembered.
//
// GitHub's description lists, per operation, the statuses it answers on
// success and the usual failures, but not every failure any endpoint can
// give. These statuses are accepted on every operation, with a body that
// must be a basic-error:
//   - 400 a body that is not JSON;
//   - 401 missing, bad or expired credentials (the description declares
//     it on a handful of operations only);
//   - 403 a token without the permission ("Resource not accessible by
//     integration"), or a rate limit;
//   - 404 a resource the caller cannot see (GitHub hides private
//     repositories behind 404, not 403);
//   - 429, 500, 502, 503: secondary rate limits and server failures
//     (FailNext).
var anyOperation = map[int]bool{400: true, 401: true, 403: true, 404: true, 429: true, 500: true, 502: true, 503: true}

// basicErrorPointer is the schema every undeclared error body must match.
const basicErrorPointer = "/components/schemas/basic-error"

// responsePointers indexes an operation's responses object: status →
// JSON pointer of the application/json schema ("" when the response has
// no JSON body). A response given as a $ref points into
// #/components/responses.
func responsePointers(root map[string]any, base string, v any) map[int]string {
	rs, _ := v.(map[string]any)
	out := map[int]string{}
	for code, rv := range rs {
		n, err := strconv.Atoi(code)
		if err != nil {
			continue // "default" is not used by GitHub's description
		}
		ptr := base + "/" + code
		r, _ := rv.(map[string]any)
		for i := 0; r != nil && i < 8; i++ {
			ref, ok := r["$ref"].(string)
			if !ok {
				break
			}
			ptr = strings.TrimPrefix(ref, "#")
			r = lookupPointer(root, ptr)
		}
		schema := ""
		if content, ok := r["content"].(map[string]any); ok {
			if mt, ok := content["application/json"].(map[string]any); ok && mt["schema"] != nil {
				schema = ptr + "/content/application~1json/schema"
			}
		}
		out[n] = schema
	}
	return out
}

// fixKnownDeviations patches the few places where GitHub's description
// disagrees with what GitHub sends, each one documented:
//   - a pull request whose head fork was deleted has "head": {"repo":
//     null}; the description types head.repo as a non-null repository.
func fixKnownDeviations(root map[string]any) {
	if head := lookupPointer(root, "/components/schemas/pull-request/properties/head/properties"); head != nil {
		if repo, ok := head["repo"]; ok {
			head["repo"] = map[string]any{"anyOf": []any{repo, map[string]any{"type": "null"}}}
		}
	}
}

// ValidateResponse checks one of the fake's answers to op: the status must
// be declared for the operation (or be one GitHub gives on any operation,
// see anyOperation), and a JSON body must match the declared schema (a
// basic-error for the undeclared ones). Operations without response data
// (NewUnchecked) are not checked.
func (s *Spec) ValidateResponse(op *Operation, status int, contentType string, body []byte) error {
	if op.responses == nil {
		return nil
	}
	ptr, declared := op.responses[status]
	switch {
	case declared:
	case anyOperation[status]:
		ptr = basicErrorPointer
	default:
		return fmt.Errorf("response %d is not declared for %s %s (declared: %s)", status, op.Method, op.Path, declaredStatuses(op))
	}
	trimmed := bytes.TrimSpace(body)
	if ptr == "" {
		if len(trimmed) > 0 && status != http.StatusNoContent && status != http.StatusNotModified {
			return nil // a body GitHub documents without a schema
		}
		if len(trimmed) > 0 {
			return fmt.Errorf("response %d of %s %s has a body; GitHub sends none", status, op.Method, op.Path)
		}
		return nil
	}
	if len(trimmed) == 0 {
		return fmt.Errorf("response %d of %s %s has no body; the description expects JSON", status, op.Method, op.Path)
	}
	if mediaType(contentType) {
		return nil // a diff or patch media type GitHub documents beside the JSON
	}
	if !strings.HasPrefix(contentType, "application/json") {
		return fmt.Errorf("response %d of %s %s is %q, not application/json", status, op.Method, op.Path, contentType)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(trimmed))
	if err != nil {
		return fmt.Errorf("response %d of %s %s is not JSON: %w", status, op.Method, op.Path, err)
	}
	sch, err := s.compile(ptr, op)
	if err != nil {
		return err
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("response %d of %s %s does not match the description: %w", status, op.Method, op.Path, err)
	}
	return nil
}

func declaredStatuses(op *Operation) string {
	var codes []string
	for c := range op.responses {
		codes = append(codes, strconv.Itoa(c))
	}
	sortStrings(codes)
	return strings.Join(codes, ", ")
}

// mediaType reports whether contentType is one of GitHub's non-JSON media
// types (application/vnd.github.diff, .patch), which the description
// mentions in prose only ("Pass the appropriate media type").
func mediaType(contentType string) bool {
	ct, _, _ := strings.Cut(contentType, ";")
	switch strings.TrimSpace(ct) {
	case "application/vnd.github.diff", "application/vnd.github.patch":
		return true
	}
	return false
}

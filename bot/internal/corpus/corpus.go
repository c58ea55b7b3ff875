// Package corpus finds the npm packages that bot tests use as corpora
// (@octokit/openapi, @octokit/webhooks-examples). .ci/npm-deps.sh installs
// them into $AGENTOS_NPM_DIR (default ~/.cache/agentos-npm).
//
// A developer without the corpus gets a loud skip; under CI=true a missing
// corpus fails the test, because a skipped corpus test proves nothing.
package corpus

import (
	"os"
	"path/filepath"
)

// TB is the part of testing.TB the corpus needs; *testing.T satisfies it.
// It is an interface of its own so that this package does not pull the
// testing package into a binary that imports it (agentos demo --github).
type TB interface {
	Helper()
	Fatal(args ...any)
	Skip(args ...any)
}

// Dir returns the npm install directory (the one holding node_modules).
func Dir() string {
	if d := os.Getenv("AGENTOS_NPM_DIR"); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".cache", "agentos-npm")
}

// Location is where rel inside node_modules/pkg is, whether or not it
// is installed.
func Location(pkg, rel string) string { return filepath.Join(Dir(), "node_modules", pkg, rel) }

// Path returns the absolute path of rel inside node_modules/pkg, or ends the
// test: a skip on a developer's machine, a failure under CI=true.
func Path(tb TB, pkg, rel string) string {
	tb.Helper()
	p := Location(pkg, rel)
	if _, err := os.Stat(p); err != nil {
		msg := "npm corpus " + pkg + " is missing (" + p + "): run `bash .ci/npm-deps.sh` (or set AGENTOS_NPM_DIR)"
		if os.Getenv("CI") == "true" {
			tb.Fatal(msg)
		}
		tb.Skip("SKIPPING: " + msg)
	}
	return p
}

// OpenAPI returns the path of GitHub's api.github.com OpenAPI description.
func OpenAPI(tb TB) string {
	tb.Helper()
	return Path(tb, "@octokit/openapi", "generated/api.github.com.json")
}

// The webhook examples index, as a package and a path inside it.
const webhookExamplesPkg, webhookExamplesIndex = "@octokit/webhooks-examples", "api.github.com/index.json"

// WebhookExamples returns the path of the webhook examples index.
func WebhookExamples(tb TB) string {
	tb.Helper()
	return Path(tb, webhookExamplesPkg, webhookExamplesIndex)
}

// WebhookExamplesLocation is where the webhook examples index is when
// installed, for tools that take it as a default.
func WebhookExamplesLocation() string { return Location(webhookExamplesPkg, webhookExamplesIndex) }

package config

import (
	"bytes"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// maxFileSize bounds the config file; a larger one is surely a mistake.
const maxFileSize = 1 << 20

// setting decodes one file key into the config.
type setting func(v *yaml.Node, c *Config) error

// settings maps the file's keys to their decoders.
var settings = map[string]setting{
	"addr":            str(func(c *Config) *string { return &c.Addr }),
	"data_dir":        str(func(c *Config) *string { return &c.DataDir }),
	"webhook_path":    str(func(c *Config) *string { return &c.WebhookPath }),
	"trigger":         str(func(c *Config) *string { return &c.TriggerWord }),
	"allowed_users":   list(func(c *Config) *[]string { return &c.AllowedUsers }),
	"allowed_bots":    list(func(c *Config) *[]string { return &c.AllowedBots }),
	"bot_login":       str(func(c *Config) *string { return &c.BotLogin }),
	"commit_author":   str(func(c *Config) *string { return &c.CommitAuthor }),
	"artifact_branch": str(func(c *Config) *string { return &c.ArtifactBranch }),
	"branch_prefix":   str(func(c *Config) *string { return &c.BranchPrefix }),
	"log_on_session_branch": func(v *yaml.Node, c *Config) error {
		if err := v.Decode(&c.LogOnSessionBranch); err != nil {
			return fmt.Errorf("must be true or false")
		}
		return nil
	},
	"workers":                 integer(func(c *Config) *int { return &c.Workers }),
	"max_runs":                integer(func(c *Config) *int { return &c.MaxRuns }),
	"profile":                 str(func(c *Config) *string { return &c.ProfileFile }),
	"policy":                  str(func(c *Config) *string { return &c.PolicyFile }),
	"repo_roots":              list(func(c *Config) *[]string { return &c.RepoRoots }),
	"sse_keepalive":           duration(func(c *Config) *time.Duration { return &c.SSEKeepAlive }),
	"github_api_url":          str(func(c *Config) *string { return &c.GitHubAPIURL }),
	"github_private_key_file": str(func(c *Config) *string { return &c.GitHubPrivateKeyFile }),
	"sandbox":                 str(func(c *Config) *string { return &c.Sandbox }),
	"sandbox_readonly":        list(func(c *Config) *[]string { return &c.SandboxReadOnly }),
	"retention":               retentionSetting,
	"github_app_id": func(v *yaml.Node, c *Config) error {
		var id int64
		if err := v.Decode(&id); err != nil {
			return fmt.Errorf("must be a number (the app's numeric id)")
		}
		c.GitHubAppID = id
		return nil
	},
}

// secretKeys maps keys that would hold a secret to the environment
// variable the secret belongs in.
var secretKeys = map[string]string{
	"webhook_secret":     "AGENTOS_WEBHOOK_SECRET",
	"webhook_secrets":    "AGENTOS_WEBHOOK_SECRET",
	"secret":             "AGENTOS_WEBHOOK_SECRET",
	"github_token":       "AGENTOS_GITHUB_TOKEN",
	"token":              "AGENTOS_GITHUB_TOKEN",
	"private_key":        "AGENTOS_GITHUB_PRIVATE_KEY_FILE",
	"github_private_key": "AGENTOS_GITHUB_PRIVATE_KEY_FILE",
	"app_private_key":    "AGENTOS_GITHUB_PRIVATE_KEY_FILE",
	"api_token":          "AGENTOS_API_TOKEN",
}

// secretEnv returns where a secret-looking key belongs.
func secretEnv(key string) (string, bool) {
	k := strings.ToLower(key)
	if env, ok := secretKeys[k]; ok {
		return env, true
	}
	if _, ok := settings[k]; ok {
		return "", false
	}
	for _, w := range []string{"secret", "token", "password", "private_key"} {
		if strings.Contains(k, w) {
			return "the matching AGENTOS_* variable (or its _FILE variant)", true
		}
	}
	return "", false
}

func str(field func(*Config) *string) setting {
	return func(v *yaml.Node, c *Config) error {
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			return fmt.Errorf("must be a string")
		}
		*field(c) = v.Value
		return nil
	}
}

func list(field func(*Config) *[]string) setting {
	return func(v *yaml.Node, c *Config) error {
		var l []string
		if v.Kind != yaml.SequenceNode || v.Decode(&l) != nil {
			return fmt.Errorf("must be a list of strings")
		}
		*field(c) = l
		return nil
	}
}

func integer(field func(*Config) *int) setting {
	return func(v *yaml.Node, c *Config) error {
		var n int
		if v.Kind != yaml.ScalarNode || v.Decode(&n) != nil {
			return fmt.Errorf("must be a whole number, not %q", v.Value)
		}
		*field(c) = n
		return nil
	}
}

func duration(field func(*Config) *time.Duration) setting {
	return func(v *yaml.Node, c *Config) error {
		d, err := time.ParseDuration(v.Value)
		if v.Kind != yaml.ScalarNode || err != nil {
			return fmt.Errorf("must be a duration like 15s or 1m, not %q", v.Value)
		}
		*field(c) = d
		return nil
	}
}

// Parse reads a YAML config file over the defaults. name is used in error
// messages. Unknown keys, secrets and values of the wrong type are errors
// (*ParseError, *SecretInFileError) that point at the key.
func Parse(name string, r io.Reader) (Config, error) {
	c := Default()
	if err := parseInto(name, r, &c); err != nil {
		return Default(), err
	}
	return c, nil
}

var yamlLine = regexp.MustCompile(`line (\d+)`)

func parseInto(name string, r io.Reader, c *Config) error {
	b, err := io.ReadAll(io.LimitReader(r, maxFileSize+1))
	if err != nil {
		return &ParseError{File: name, Msg: err.Error()}
	}
	if len(b) > maxFileSize {
		return &ParseError{File: name, Msg: fmt.Sprintf("larger than %d bytes", maxFileSize)}
	}
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&doc); err != nil {
		if err == io.EOF {
			return nil // an empty file keeps the defaults
		}
		pe := &ParseError{File: name, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			pe.Line, _ = strconv.Atoi(m[1])
			pe.Column = 1
			pe.Msg = strings.TrimPrefix(pe.Msg, m[0]+": ")
		}
		return pe
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil
	}
	if root.Kind != yaml.MappingNode {
		return &ParseError{File: name, Line: root.Line, Column: root.Column, Msg: "the config file must be a mapping of settings (key: value)"}
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if line, dup := seen[k.Value]; dup {
			return &ParseError{File: name, Line: k.Line, Column: k.Column, Key: k.Value, Msg: fmt.Sprintf("%q is set twice (first on line %d)", k.Value, line)}
		}
		seen[k.Value] = k.Line
		if env, ok := secretEnv(k.Value); ok {
			return &SecretInFileError{File: name, Line: k.Line, Column: k.Column, Key: k.Value, Env: env}
		}
		set, ok := settings[k.Value]
		if !ok {
			return &ParseError{File: name, Line: k.Line, Column: k.Column, Key: k.Value, Msg: fmt.Sprintf("unknown key %q (known keys: %s)", k.Value, strings.Join(knownKeys(), ", "))}
		}
		if err := set(v, c); err != nil {
			return &ParseError{File: name, Line: v.Line, Column: v.Column, Key: k.Value, Msg: k.Value + ": " + err.Error()}
		}
		c.setSource(k.Value, fmt.Sprintf("%s:%d", name, k.Line))
	}
	return nil
}

func knownKeys() []string {
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

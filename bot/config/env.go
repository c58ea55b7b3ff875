package config

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Environment variables the server reads.
const (
	EnvData           = "AGENTOS_DATA"
	EnvWebhookSecret  = "AGENTOS_WEBHOOK_SECRET"
	EnvGitHubToken    = "AGENTOS_GITHUB_TOKEN"
	EnvGitHubTokenStd = "GITHUB_TOKEN"
	EnvAppID          = "AGENTOS_GITHUB_APP_ID"
	EnvPrivateKey     = "AGENTOS_GITHUB_PRIVATE_KEY"
	EnvPrivateKeyFile = "AGENTOS_GITHUB_PRIVATE_KEY_FILE"
	EnvAPIURL         = "AGENTOS_GITHUB_API_URL"
	EnvAPIToken       = "AGENTOS_API_TOKEN"
	EnvCommitAuthor   = "AGENTOS_COMMIT_AUTHOR"
	EnvSandbox        = "AGENTOS_SANDBOX"
	// EnvSandboxReadOnly is the same variable runtime/setup reads for the
	// CLI and the Action.
	EnvSandboxReadOnly = "AGENTOS_SANDBOX_READONLY"
	EnvDatabaseURL     = "AGENTOS_DATABASE_URL"
	EnvReplicaID       = "AGENTOS_REPLICA_ID"
)

// secret reads NAME or NAME_FILE (the file's content, surrounding space
// trimmed). It is an error to set both.
func secret(getenv func(string) string, name string) (string, string, error) {
	v, file := getenv(name), getenv(name+"_FILE")
	if v != "" && file != "" {
		return "", "", &EnvError{Var: name, Err: ErrAmbiguous}
	}
	if file == "" {
		return strings.TrimSpace(v), "env " + name, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", "", &EnvError{Var: name + "_FILE", Err: err}
	}
	return strings.TrimSpace(string(b)), "env " + name + "_FILE", nil
}

// ApplyEnv overlays the environment: AGENTOS_DATA, AGENTOS_GITHUB_API_URL,
// AGENTOS_COMMIT_AUTHOR, AGENTOS_GITHUB_APP_ID,
// AGENTOS_GITHUB_PRIVATE_KEY_FILE, AGENTOS_SANDBOX and the secrets
// AGENTOS_WEBHOOK_SECRET, AGENTOS_GITHUB_TOKEN (GITHUB_TOKEN when neither it
// nor an app is configured), AGENTOS_GITHUB_PRIVATE_KEY and
// AGENTOS_API_TOKEN, each also as NAME_FILE naming a file that holds it.
// getenv is os.Getenv in production.
func (c *Config) ApplyEnv(getenv func(string) string) error {
	if getenv == nil {
		getenv = os.Getenv
	}
	var errs []error
	plain := func(name, field string, dst *string) {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			*dst = v
			c.setSource(field, "env "+name)
		}
	}
	plain(EnvData, "data_dir", &c.DataDir)
	plain(EnvAPIURL, "github_api_url", &c.GitHubAPIURL)
	plain(EnvPrivateKeyFile, "github_private_key_file", &c.GitHubPrivateKeyFile)
	plain(EnvCommitAuthor, "commit_author", &c.CommitAuthor)
	plain(EnvSandbox, "sandbox", &c.Sandbox)
	if v := strings.TrimSpace(getenv(EnvSandboxReadOnly)); v != "" {
		c.SandboxReadOnly = nil
		for _, p := range filepath.SplitList(v) {
			if p != "" {
				c.SandboxReadOnly = append(c.SandboxReadOnly, p)
			}
		}
		c.setSource("sandbox_readonly", "env "+EnvSandboxReadOnly)
	}
	if v := strings.TrimSpace(getenv(EnvAppID)); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			errs = append(errs, &EnvError{Var: EnvAppID, Err: fmt.Errorf("%q is not a number (the app's numeric id)", v)})
		} else {
			c.GitHubAppID = id
			c.setSource("github_app_id", "env "+EnvAppID)
		}
	}

	if v, src, err := secret(getenv, EnvWebhookSecret); err != nil {
		errs = append(errs, err)
	} else if v != "" {
		// Comma-separated (a file may put one per line); empty entries
		// are kept so that Validate can name them.
		c.WebhookSecrets = nil
		for _, s := range strings.Split(strings.ReplaceAll(v, "\n", ","), ",") {
			c.WebhookSecrets = append(c.WebhookSecrets, strings.TrimSpace(s))
		}
		c.setSource("webhook_secret", src)
	}
	plain(EnvReplicaID, "replica_id", &c.ReplicaID)
	if v, src, err := secret(getenv, EnvDatabaseURL); err != nil {
		errs = append(errs, err)
	} else if v != "" {
		c.StoreURL = v
		c.setSource("store", src)
	}
	if v, src, err := secret(getenv, EnvAPIToken); err != nil {
		errs = append(errs, err)
	} else if v != "" {
		c.APIToken = v
		c.setSource("api_token", src)
	}
	// AGENTOS_GITHUB_PRIVATE_KEY_FILE is the file variant of
	// AGENTOS_GITHUB_PRIVATE_KEY; it was read into GitHubPrivateKeyFile
	// above so that the file may also come from the config file.
	if v := strings.TrimSpace(getenv(EnvPrivateKey)); v != "" {
		if c.GitHubPrivateKeyFile != "" {
			errs = append(errs, &EnvError{Var: EnvPrivateKey, Err: fmt.Errorf("the private key is also given as a file (%s); set one", c.source("github_private_key_file"))})
		}
		c.GitHubPrivateKey = []byte(v + "\n")
		c.setSource("github_private_key", "env "+EnvPrivateKey)
	}
	if c.GitHubPrivateKeyFile != "" && len(c.GitHubPrivateKey) == 0 {
		b, err := os.ReadFile(c.GitHubPrivateKeyFile)
		if err != nil {
			errs = append(errs, &EnvError{Var: "github_private_key_file (" + c.source("github_private_key_file") + ")", Err: err})
		} else {
			c.GitHubPrivateKey = b
			c.setSource("github_private_key", c.source("github_private_key_file"))
		}
	}
	if v, src, err := secret(getenv, EnvGitHubToken); err != nil {
		errs = append(errs, err)
	} else if v != "" {
		c.GitHubToken = v
		c.setSource("github_token", src)
	} else if std := strings.TrimSpace(getenv(EnvGitHubTokenStd)); std != "" && c.GitHubAppID == 0 && len(c.GitHubPrivateKey) == 0 {
		// The generic variable is a fallback only: an app configured
		// explicitly wins over a GITHUB_TOKEN that happens to be set.
		c.GitHubToken = std
		c.setSource("github_token", "env "+EnvGitHubTokenStd)
	}
	errs = append(errs, c.applyRetentionEnv(getenv)...)
	return errors.Join(errs...)
}

// Flags binds the command-line flags --addr, --data, --config, --store,
// --retention-sessions and --retention-deliveries.
type Flags struct {
	fs                        *flag.FlagSet
	addr, data, config, store string
	retention                 retentionFlags
}

// BindFlags registers the flags of Flags on fs.
func BindFlags(fs *flag.FlagSet) *Flags {
	d := Default()
	f := &Flags{fs: fs}
	fs.StringVar(&f.addr, "addr", d.Addr, "listen address host:port")
	fs.StringVar(&f.data, "data", d.DataDir, "embedded store directory (default $"+EnvData+" or "+d.DataDir+")")
	fs.StringVar(&f.config, "config", "", "YAML config file (no secrets: those come from the environment)")
	fs.StringVar(&f.store, "store", "", "postgres://… URL: the event store and delivery queue in PostgreSQL, shared by replicas (default $"+EnvDatabaseURL+"; unset: SQLite in --data)")
	f.retention.bind(fs)
	return f
}

// Load builds the configuration after fs was parsed: defaults, the
// --config file, the environment (getenv; os.Getenv when nil), then the
// flags given on the command line; and validates it.
func (f *Flags) Load(getenv func(string) string) (Config, error) {
	given := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	c := Default()
	if f.config != "" {
		file, err := os.Open(f.config)
		if err != nil {
			return c, &ParseError{File: f.config, Msg: err.Error()}
		}
		err = parseInto(f.config, file, &c)
		file.Close()
		if err != nil {
			return c, err
		}
	}
	if err := c.ApplyEnv(getenv); err != nil {
		return c, err
	}
	if given["addr"] {
		c.Addr = f.addr
		c.setSource("addr", "--addr")
	}
	if given["data"] {
		c.DataDir = f.data
		c.setSource("data_dir", "--data")
	}
	if given["store"] {
		c.StoreURL = f.store
		c.setSource("store", "--store")
	}
	if err := f.retention.apply(given, &c); err != nil {
		return c, err
	}
	return c, c.Validate()
}

package kernel

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/agentos/agentos/kernel/policy"
)

// Control paths.
const (
	ControlAuto        = "auto"
	ControlPreviewAuto = "preview_auto"
	ControlApproval    = "preview_approval"
	ControlDeny        = "deny"
)

// Risk is the risk profile of one call; it decides the control path.
type Risk struct {
	Tool            string   `json:"tool"`
	Category        Category `json:"category"`
	Paths           []string `json:"paths,omitempty"`
	Command         string   `json:"command,omitempty"`
	EstimatedImpact string   `json:"estimated_impact"` // small | medium | large
	TouchesSecrets  bool     `json:"touches_secrets"`
	TouchesConfig   bool     `json:"touches_config"`
	TouchesBuild    bool     `json:"touches_build"`
	HighRiskCommand bool     `json:"high_risk_command,omitempty"`
	Trusted         bool     `json:"trusted,omitempty"` // lowered by adaptive trust
	// ProtectedPaths are the CI and agent configuration paths a write
	// changes (IsProtectedPath): such a write always needs approval.
	ProtectedPaths []string `json:"protected_paths,omitempty"`
	Control        string   `json:"control"`
	Reason         string   `json:"reason,omitempty"`

	refuse *Error // Assessment.Refuse
}

// Preview is what a maintainer sees before approving (and what the agent
// gets back to refine its plan).
type Preview struct {
	Files        []FileChange `json:"files,omitempty"`
	Hunks        int          `json:"hunks,omitempty"`
	LinesAdded   int          `json:"lines_added,omitempty"`
	LinesRemoved int          `json:"lines_removed,omitempty"`
	Diff         string       `json:"diff,omitempty"`
	DiffTrunc    bool         `json:"diff_truncated,omitempty"`
	Command      string       `json:"command,omitempty"`
	Cwd          string       `json:"cwd,omitempty"`
	EnvNames     []string     `json:"env_names,omitempty"`
	Timeout      string       `json:"timeout,omitempty"`
	Paths        []string     `json:"paths,omitempty"`
	// ProtectedPaths: the CI and agent configuration this write changes,
	// the reason it waits for a maintainer whatever the policy says.
	ProtectedPaths []string `json:"protected_paths,omitempty"`
}

func matchAny(p string, pats []string) bool {
	base := path.Base(p)
	for _, pat := range pats {
		if strings.Contains(pat, "/") {
			if strings.HasPrefix(p, pat) {
				return true
			}
		} else if ok, _ := path.Match(pat, base); ok {
			return true
		}
	}
	return false
}

var (
	secretPaths = []string{".env", ".env.*", "*.pem", "*.key", "id_rsa*", "id_ed25519*", "*.p12", "*.pfx", "credentials*", "*secret*", ".npmrc", ".pypirc", ".netrc"}
	configPaths = []string{"*.yaml", "*.yml", "*.toml", "*.ini", "*.cfg", "*.conf", "*.json", ".github/", ".agent/", ".claude/", "CODEOWNERS"}
	buildPaths  = []string{"Makefile", "*.mk", "go.mod", "go.sum", "package.json", "package-lock.json", "pnpm-lock.yaml", "yarn.lock", "Dockerfile", "*.dockerfile", "pyproject.toml", "setup.py", "requirements*.txt", "Cargo.toml", "Cargo.lock", "build.gradle", "pom.xml", ".github/workflows/", "action.yml", "action.yaml"}
)

// assess computes the call's risk profile and preview without side effects.
func (k *Kernel) assess(ctx context.Context, env Env, r *registered, args []byte) (Risk, Preview, *Error) {
	risk := Risk{Tool: r.def.Name, Category: r.def.Category, EstimatedImpact: "small"}
	var a Assessment
	if r.def.Assess != nil {
		var err error
		a, err = r.def.Assess(ctx, env, args)
		if err != nil {
			var ke *Error
			if errors.As(err, &ke) {
				return risk, Preview{}, ke
			}
			return risk, Preview{}, &Error{Kind: "policy", Code: CodeInvalidArguments, Message: err.Error()}
		}
	}
	risk.Paths, risk.Command, risk.refuse = a.Paths, a.Command, a.Refuse
	for _, f := range a.Files {
		risk.Paths = appendUnique(risk.Paths, f.Path)
		if f.OldPath != "" {
			risk.Paths = appendUnique(risk.Paths, f.OldPath)
		}
	}
	for _, p := range risk.Paths {
		risk.TouchesSecrets = risk.TouchesSecrets || matchAny(p, secretPaths)
		risk.TouchesConfig = risk.TouchesConfig || matchAny(p, configPaths)
		risk.TouchesBuild = risk.TouchesBuild || matchAny(p, buildPaths)
	}
	pol := k.Policy
	preview := Preview{Files: a.Files, LinesAdded: a.LinesAdded, LinesRemoved: a.LinesRemoved, Command: a.Command, Cwd: a.Cwd, EnvNames: a.EnvVars, Timeout: a.Timeout}
	if r.def.Category == CategoryRead {
		preview.Paths = a.Paths
	}
	for _, f := range a.Files {
		preview.Hunks += f.Hunks
	}
	if a.Diff != "" {
		preview.Diff = a.Diff
		if max := pol.Limits.MaxDiffSize; max > 0 && len(a.Diff) > max {
			return risk, preview, &Error{Kind: "policy", Code: CodePolicyDenied, Message: fmt.Sprintf("the change is %d bytes of diff, over limits.maxDiffSize %d: split it", len(a.Diff), max)}
		}
		if len(preview.Diff) > 60000 {
			preview.Diff, preview.DiffTrunc = preview.Diff[:60000], true
		}
	}
	// Impact from the size of the change or the command.
	changed := a.LinesAdded + a.LinesRemoved
	switch {
	case len(a.Files) > 10 || changed > 500:
		risk.EstimatedImpact = "large"
	case len(a.Files) > 3 || changed > 50:
		risk.EstimatedImpact = "medium"
	}
	if a.Command != "" {
		argv := strings.Fields(a.Command)
		if len(argv) > 0 && pol.IsHighRisk(argv[0]) {
			risk.HighRiskCommand, risk.EstimatedImpact = true, "large"
		} else if risk.EstimatedImpact == "small" {
			risk.EstimatedImpact = "medium"
		}
	}
	// Control path.
	level := pol.Approval(r.def.Name)
	switch {
	case risk.HighRiskCommand && pol.Risk.HighRiskAction == "deny":
		risk.Control, risk.Reason = ControlDeny, fmt.Sprintf("%q is a high-risk command and policy denies those", a.Command)
	case level == policy.Never:
		risk.Control = ControlAuto
		if r.def.Category != CategoryRead {
			risk.Control = ControlPreviewAuto
		}
	case level == policy.Always:
		risk.Control, risk.Reason = ControlApproval, "policy: "+r.def.Name+" always needs approval"
	default: // risk
		if risk.HighRiskCommand || risk.TouchesSecrets || risk.TouchesConfig || risk.TouchesBuild || risk.EstimatedImpact == "large" {
			risk.Control, risk.Reason = ControlApproval, "policy: risky "+r.def.Name
			// Adaptive trust counts approvals of the exact same
			// command line, so a trusted "rm -f build.log" trusts nothing
			// else; under approval "risk" a command needs approval only when
			// it is high-risk, so those are exactly the calls trust may lower.
			// Anything touching secrets is never lowered.
			if pol.Trust.Enabled && k.Trust != nil && !risk.TouchesSecrets {
				c := k.Trust(r.def.Name, a.Command)
				if c.Approved >= pol.Trust.CleanApprovals && c.Denied == 0 && c.Failed == 0 && c.Reverted == 0 {
					risk.Control, risk.Trusted, risk.Reason = ControlPreviewAuto, true, fmt.Sprintf("adaptive trust: %d clean approvals", c.Approved)
				}
			}
		} else {
			risk.Control = ControlPreviewAuto
		}
	}
	// CI and agent configuration: after the policy, so no policy lowers it.
	if r.def.Category == CategoryWrite && risk.Control != ControlDeny {
		if ci := k.protectedPaths(risk.Paths); len(ci) > 0 {
			risk.Control, risk.Trusted, risk.ProtectedPaths, preview.ProtectedPaths = ControlApproval, false, ci, ci
			risk.Reason = fmt.Sprintf("%s changes CI or agent configuration (%s): that always needs a maintainer's approval, whatever policy.yaml says", r.def.Name, strings.Join(ci, ", "))
		}
	}
	return risk, preview, nil
}

// Changes to these paths run code or change what reviews, builds and
// agents trust: CI definitions, GitHub's workflows, actions, CODEOWNERS
// and dependabot, agent configuration and git's per-path behaviour. A
// write touching one always needs approval (docs/kernel-policy.md, "CI
// and agent configuration"). Names are compared case-insensitively, as a
// case-insensitive file system (macOS, Windows) would.
var (
	// protectedDirs are directories, at any depth.
	protectedDirs = []string{".github", ".gitlab", ".circleci", ".buildkite", ".agent", ".claude"}
	// protectedFiles are file names, at any depth.
	protectedFiles = []string{".gitlab-ci.yml", ".gitlab-ci.yaml", ".travis.yml", ".travis.yaml", "azure-pipelines.yml", "azure-pipelines.yaml", "jenkinsfile", ".mcp.json", ".gitmodules", ".gitattributes", "action.yml", "action.yaml", "codeowners"}
)

// IsProtectedPath reports whether a workspace-relative path is CI or
// agent configuration (protectedDirs, protectedFiles). The path is
// cleaned first ("./", "a/../", doubled and back slashes), and each
// component is compared without case and without trailing dots and
// spaces (which Windows ignores).
func IsProtectedPath(p string) bool {
	p = path.Clean("/" + strings.ReplaceAll(p, `\`, "/"))
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, seg := range segs {
		seg = strings.ToLower(strings.TrimRight(seg, ". "))
		for _, d := range protectedDirs {
			if seg == d {
				return true
			}
		}
		if i == len(segs)-1 {
			for _, f := range protectedFiles {
				if seg == f {
					return true
				}
			}
		}
	}
	return false
}

// protectedPaths returns the paths, as the call named them, that are CI
// or agent configuration, under their own name or, when the workspace
// resolves paths (kernel/workspace does), under the name a symlink in the
// workspace leads to (ci/x.yml where ci is a link to .github).
func (k *Kernel) protectedPaths(paths []string) []string {
	res, _ := k.Workspace.(interface{ Resolve(string) (string, error) })
	var out []string
	for _, p := range paths {
		hit := IsProtectedPath(p)
		if !hit && res != nil {
			if r, err := res.Resolve(p); err == nil && IsProtectedPath(r) {
				hit = true
			}
		}
		if hit {
			out = appendUnique(out, p)
		}
	}
	return out
}

func appendUnique(l []string, s string) []string {
	for _, x := range l {
		if x == s {
			return l
		}
	}
	return append(l, s)
}

package github

import (
	"context"
	"encoding/base64"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	gh "github.com/google/go-github/v62/github"
)

// FileChange is one file of a commit made through the Git Data API:
// Content written at Path (Mode 100644 unless set), or Path deleted.
type FileChange struct {
	Path    string
	Content []byte
	Mode    string // 100644 (default), 100755 or 120000
	Delete  bool
}

// Commit is a commit created through the Git Data API.
type Commit struct {
	SHA string
	// Verified is GitHub's verdict on the commit's signature: a commit an
	// app creates through the API without naming a committer is signed by
	// GitHub and shows as Verified.
	Verified bool
	Reason   string
}

// CreateCommit makes a commit on top of parent with changes through the
// Git Data API — one blob per written file, one tree on the parent's, one
// commit — without moving any ref (UpdateRef does). No committer is named,
// so GitHub signs it: in App mode the commit is the app's and Verified,
// which a commit pushed over git is not. Calls: 1 (the parent) + one per
// written file + 2.
func (c *Client) CreateCommit(ctx context.Context, owner, repo, parent, message string, changes []FileChange) (Commit, error) {
	const op = "CreateCommit"
	if len(parent) != 40 || strings.Trim(parent, "0123456789abcdef") != "" {
		return Commit{}, invalid(op, fmt.Sprintf("parent %q is not a commit SHA", parent))
	}
	if strings.TrimSpace(message) == "" || len(changes) == 0 {
		return Commit{}, invalid(op, "a commit needs a message and at least one change")
	}
	seen := map[string]bool{}
	for _, ch := range changes {
		p := ch.Path
		if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") || p == ".git" || strings.HasPrefix(p, ".git/") || seen[p] {
			return Commit{}, invalid(op, fmt.Sprintf("path %q is not a clean, relative path of its own", p))
		}
		seen[p] = true
		switch ch.Mode {
		case "", "100644", "100755", "120000":
		default:
			return Commit{}, invalid(op, fmt.Sprintf("%s: mode %q is not 100644, 100755 or 120000", p, ch.Mode))
		}
	}
	g, err := c.on(ctx, Repo{Owner: owner, Name: repo})
	if err != nil {
		return Commit{}, err
	}
	base, _, err := g.Git.GetCommit(ctx, owner, repo, parent)
	if err != nil {
		return Commit{}, wrap(op, err)
	}
	entries := make([]*gh.TreeEntry, 0, len(changes))
	for _, ch := range changes {
		mode := ch.Mode
		if mode == "" {
			mode = "100644"
		}
		e := &gh.TreeEntry{Path: gh.String(ch.Path), Mode: gh.String(mode), Type: gh.String("blob")}
		if !ch.Delete {
			b, _, err := g.Git.CreateBlob(ctx, owner, repo, &gh.Blob{Content: gh.String(base64.StdEncoding.EncodeToString(ch.Content)), Encoding: gh.String("base64")})
			if err != nil {
				return Commit{}, wrap(op, err)
			}
			e.SHA = b.SHA
		} // a nil SHA (and no content) deletes the path: go-github sends "sha": null
		entries = append(entries, e)
	}
	tree, _, err := g.Git.CreateTree(ctx, owner, repo, base.GetTree().GetSHA(), entries)
	if err != nil {
		return Commit{}, wrap(op, err)
	}
	cm, _, err := g.Git.CreateCommit(ctx, owner, repo, &gh.Commit{Message: gh.String(message), Tree: &gh.Tree{SHA: tree.SHA}, Parents: []*gh.Commit{{SHA: gh.String(parent)}}}, nil)
	if err != nil {
		return Commit{}, wrap(op, err)
	}
	return Commit{SHA: cm.GetSHA(), Verified: cm.GetVerification().GetVerified(), Reason: cm.GetVerification().GetReason()}, nil
}

// TreeEntry is one entry of a tree made on a base tree: Path set to the
// blob SHA with Mode, or deleted from the base tree.
type TreeEntry struct {
	Path string
	Mode string // 100644, 100755 or 120000
	SHA  string
	// Content (UTF-8 text) instead of SHA: GitHub writes the blob.
	Content []byte
	Delete  bool
}

// CreateBlob stores content (sent base64, so any bytes survive) and
// returns its SHA.
func (c *Client) CreateBlob(ctx context.Context, owner, repo string, content []byte) (string, error) {
	g, err := c.on(ctx, Repo{Owner: owner, Name: repo})
	if err != nil {
		return "", err
	}
	b, _, err := g.Git.CreateBlob(ctx, owner, repo, &gh.Blob{Content: gh.String(base64.StdEncoding.EncodeToString(content)), Encoding: gh.String("base64")})
	if err != nil {
		return "", wrap("CreateBlob", err)
	}
	return b.GetSHA(), nil
}

// CreateTree makes a tree from base with entries applied and returns its
// SHA. A deleted entry goes as "sha": null, as GitHub documents.
func (c *Client) CreateTree(ctx context.Context, owner, repo, base string, entries []TreeEntry) (string, error) {
	const op = "CreateTree"
	out := make([]*gh.TreeEntry, 0, len(entries))
	for _, e := range entries {
		if e.Path == "" || path.IsAbs(e.Path) || path.Clean(e.Path) != e.Path || strings.HasPrefix(e.Path, "../") || e.Path == ".." {
			return "", invalid(op, fmt.Sprintf("path %q is not a clean, relative path", e.Path))
		}
		te := &gh.TreeEntry{Path: gh.String(e.Path), Mode: gh.String("100644"), Type: gh.String("blob")}
		if !e.Delete {
			switch e.Mode {
			case "100644", "100755", "120000":
			default:
				return "", invalid(op, fmt.Sprintf("%s: mode %q is not 100644, 100755 or 120000", e.Path, e.Mode))
			}
			te.Mode = gh.String(e.Mode)
			switch {
			case e.Content != nil && e.SHA == "":
				if !utf8.Valid(e.Content) {
					return "", invalid(op, fmt.Sprintf("%s: content is not UTF-8; send a blob", e.Path))
				}
				te.Content = gh.String(string(e.Content))
			case e.Content == nil && len(e.SHA) == 40:
				te.SHA = gh.String(e.SHA)
			default:
				return "", invalid(op, fmt.Sprintf("%s: an entry needs a blob SHA or content, not both", e.Path))
			}
		}
		out = append(out, te)
	}
	g, err := c.on(ctx, Repo{Owner: owner, Name: repo})
	if err != nil {
		return "", err
	}
	t, _, err := g.Git.CreateTree(ctx, owner, repo, base, out)
	if err != nil {
		return "", wrap(op, err)
	}
	return t.GetSHA(), nil
}

// CreateGitCommit makes a commit of tree with parents and message, naming
// no author or committer: GitHub makes it the caller's and, for an app,
// signs it (Verified).
func (c *Client) CreateGitCommit(ctx context.Context, owner, repo, message, tree string, parents []string) (Commit, error) {
	g, err := c.on(ctx, Repo{Owner: owner, Name: repo})
	if err != nil {
		return Commit{}, err
	}
	ps := make([]*gh.Commit, 0, len(parents))
	for _, p := range parents {
		ps = append(ps, &gh.Commit{SHA: gh.String(p)})
	}
	cm, _, err := g.Git.CreateCommit(ctx, owner, repo, &gh.Commit{Message: gh.String(message), Tree: &gh.Tree{SHA: gh.String(tree)}, Parents: ps}, nil)
	if err != nil {
		return Commit{}, wrap("CreateGitCommit", err)
	}
	return Commit{SHA: cm.GetSHA(), Verified: cm.GetVerification().GetVerified(), Reason: cm.GetVerification().GetReason()}, nil
}

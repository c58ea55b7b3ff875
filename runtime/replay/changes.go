package replay

import (
	"encoding/json"
	"path"

	"github.com/agentos/agentos/runtime/event"
)

// FileChange is one path the kernel's file tools left changed in a
// session's worktree: SHA256 is the hex SHA-256 of the content the tool
// wrote, "" when it deleted the path.
type FileChange struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256,omitempty"`
}

// WorkspaceChanges is the change set of a session's file tools: every
// successful repo.write and repo.patch of every run of the log whose
// result comes after event afterSeq (0: all; a session commit records the
// seq whose changes it holds), in seq order, each path as the last of
// them left it (ordered by that last change). A rename is the deletion of its old path and the write of its
// new one. Only what the file tools recorded is here — commands and MCP
// tools are not — so a commit of the session takes nothing else from the
// worktree (see kernel/worktree/commit.go).
//
// A repo.patch result recorded before results named the hash of each
// written file (files[].hash) gives no content to check a file against;
// such a file is left out, and is committed only if an earlier commit
// holds it already.
func WorkspaceChanges(evs []event.Event, afterSeq int64) []FileChange {
	tools := map[string]string{} // tool.invoke id → tool, for the file tools
	at := map[string]int{}       // path → index in out
	var out []FileChange
	set := func(p, sum string) {
		if p == "" {
			return
		}
		p = path.Clean(p)
		if i, ok := at[p]; ok {
			out[i].Path = "" // superseded: dropped below
		}
		at[p] = len(out)
		out = append(out, FileChange{Path: p, SHA256: sum})
	}
	for i := range evs {
		e := &evs[i]
		switch e.Type {
		case event.ToolInvoke:
			if t := event.FieldString(e.Payload, "tool"); t == "repo.write" || t == "repo.patch" {
				tools[e.ID] = t
			}
		case event.ToolResult:
			tool, ok := tools[e.Parent()]
			if !ok || e.Seq <= afterSeq || !event.FieldBool(e.Payload, "ok") {
				continue // not a file tool, or it changed nothing (all or nothing)
			}
			res := event.Field(e.Payload, "result")
			switch tool {
			case "repo.write":
				if sum := event.FieldString(res, "hash"); sum != "" {
					set(event.FieldString(res, "path"), sum)
				}
			case "repo.patch":
				var r struct {
					Files []struct {
						Path    string  `json:"path"`
						OldPath string  `json:"old_path"`
						Op      string  `json:"op"`
						Hash    *string `json:"hash"`
					} `json:"files"`
				}
				if json.Unmarshal(res, &r) != nil {
					continue
				}
				for _, f := range r.Files {
					switch {
					case f.Op == "delete":
						set(f.Path, "")
					case f.Hash == nil || *f.Hash == "":
						// recorded before results carried hashes (see above)
					default:
						if f.Op == "rename" {
							set(f.OldPath, "")
						}
						set(f.Path, *f.Hash)
					}
				}
			}
		}
	}
	kept := out[:0]
	for _, c := range out {
		if c.Path != "" {
			kept = append(kept, c)
		}
	}
	return kept
}

package replay

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentos/agentos/runtime/event"
)

// Checkpoint is the payload of checkpoint.created: the replay
// snapshot after the event at LastSeq, hashed, so that resume folds only
// the events after it. LastHash is that event's chain hash, which binds
// the snapshot to the exact log prefix it summarises.
//
// Snapshot is the snapshot's JSON text as a string, not an object: the
// event layer re-encodes payload objects canonically, but keeps a string's
// content byte for byte, so its hash is checked without re-encoding, and
// the payload schema check and the fold skip over one string instead of
// walking every tool call of a long session.
type Checkpoint struct {
	LastSeq        int64  `json:"last_seq"`
	LastHash       string `json:"last_hash"`
	Snapshot       string `json:"snapshot"`
	SnapshotSHA256 string `json:"snapshot_sha256"`
	Summary        string `json:"summary,omitempty"`
}

// NewCheckpoint returns the checkpoint of a folder's state.
func NewCheckpoint(f *Folder) (Checkpoint, error) {
	s := f.Snapshot()
	b, err := json.Marshal(s)
	if err != nil {
		return Checkpoint{}, err
	}
	sum := sha256.Sum256(b)
	return Checkpoint{LastSeq: s.LastSeq, LastHash: s.LastHash, Snapshot: string(b), SnapshotSHA256: hex.EncodeToString(sum[:]),
		Summary: fmt.Sprintf("%d events, run %s %s", s.Events, s.RunID, s.RunStatus)}, nil
}

// ErrCheckpoint is why a checkpoint cannot be used: its snapshot does not
// hash to snapshot_sha256, or it does not match the log it is in.
var ErrCheckpoint = errors.New("checkpoint does not verify")

// restore decodes and checks a checkpoint against the log prefix evs[:i]
// (the events before the checkpoint.created event at index i).
func restore(evs []event.Event, i int) (*Folder, int, error) {
	var cp Checkpoint
	if err := json.Unmarshal(evs[i].Payload, &cp); err != nil || cp.Snapshot == "" {
		return nil, 0, fmt.Errorf("%w: seq %d: no snapshot", ErrCheckpoint, evs[i].Seq)
	}
	sum := sha256.Sum256([]byte(cp.Snapshot))
	if hex.EncodeToString(sum[:]) != cp.SnapshotSHA256 {
		return nil, 0, fmt.Errorf("%w: seq %d: the snapshot does not match its hash", ErrCheckpoint, evs[i].Seq)
	}
	var s Snapshot
	if err := json.Unmarshal([]byte(cp.Snapshot), &s); err != nil {
		return nil, 0, fmt.Errorf("%w: seq %d: %v", ErrCheckpoint, evs[i].Seq, err)
	}
	// The events are contiguous from seq evs[0].Seq: find last_seq.
	k := int(cp.LastSeq - evs[0].Seq)
	if k < 0 || k >= i || evs[k].Seq != cp.LastSeq || evs[k].Hash != cp.LastHash || s.LastSeq != cp.LastSeq || s.LastHash != cp.LastHash {
		return nil, 0, fmt.Errorf("%w: seq %d: it does not summarise this log (last_seq %d)", ErrCheckpoint, evs[i].Seq, cp.LastSeq)
	}
	return folderFrom(s), k + 1, nil
}

// folderFrom rebuilds a Folder, with its indexes, from a snapshot.
func folderFrom(s Snapshot) *Folder {
	f := NewFolder()
	if s.Agents == nil {
		s.Agents = map[string]string{}
	}
	if s.Runs == nil {
		s.Runs = map[string]*RunInfo{}
	}
	if s.ToolsInvoked == nil {
		s.ToolsInvoked = []ToolCall{}
	}
	if s.PendingApprovals == nil {
		s.PendingApprovals = []Approval{}
	}
	f.s = s
	for i, c := range s.ToolsInvoked {
		f.toolIdx[c.EventID] = i
	}
	for i, a := range s.PendingApprovals {
		f.pending[a.ID] = i
	}
	for _, a := range s.ResolvedApprovals {
		f.resolved[a.ID] = true
	}
	return f
}

// Resume folds a session from its latest valid checkpoint plus the events
// after it, and falls back to the full fold when there is none or a
// checkpoint fails its check (each failure is returned in skipped). The
// snapshot is the same as Replay's; from is the seq the checkpoint
// covered (0: full fold).
func Resume(evs []event.Event) (snap Snapshot, from int64, skipped []error, err error) {
	f, from, skipped, err := ResumeFolder(evs)
	return f.Snapshot(), from, skipped, err
}

// ResumeFolder is Resume returning the Folder, to fold further events.
func ResumeFolder(evs []event.Event) (f *Folder, from int64, skipped []error, err error) {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type != event.CheckpointCreated {
			continue
		}
		f, k, rerr := restore(evs, i)
		if rerr != nil {
			skipped = append(skipped, rerr)
			continue
		}
		for j := k; j < len(evs); j++ {
			if err := f.Apply(&evs[j]); err != nil {
				return f, 0, skipped, err
			}
		}
		return f, evs[k-1].Seq, skipped, nil
	}
	f = NewFolder()
	for i := range evs {
		if err := f.Apply(&evs[i]); err != nil {
			return f, 0, skipped, err
		}
	}
	return f, 0, skipped, nil
}

package replay

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentos/agentos/runtime/event"
)

// Checkpoint is the payload of checkpoint.created: the replay snapshot
// after the event at LastSeq, hashed, so that resume folds only the events
// after it. LastHash is that event's chain hash, which binds the snapshot
// to the exact log prefix it summarises.
//
// A checkpoint is full or incremental (ADR 29 in docs/decisions.md). A
// full one holds the snapshot in Snapshot. An incremental one holds in
// Delta only what changed since the checkpoint.created event at BaseSeq
// (whose chain hash is BaseHash), itself full or incremental; restoring it
// applies the deltas from the last full checkpoint on. Either way
// SnapshotSHA256 is the SHA-256 of the snapshot's canonical JSON (its
// members sorted, each as encoded), so the restored snapshot is checked
// whole. A writer goes back to a full checkpoint when the deltas since the
// last full one outgrow it: the log stays linear in its events and a
// restore reads at most about twice the snapshot.
//
// Snapshot and Delta are JSON text in a string, not an object: the event
// layer re-encodes payload objects canonically, but keeps a string's
// content byte for byte, so its hash is checked without re-encoding, and
// the payload schema check and the fold skip over one string instead of
// walking every tool call of a long session.
type Checkpoint struct {
	LastSeq        int64  `json:"last_seq"`
	LastHash       string `json:"last_hash"`
	Snapshot       string `json:"snapshot,omitempty"`
	Delta          string `json:"delta,omitempty"`
	BaseSeq        int64  `json:"base_seq,omitempty"`
	BaseHash       string `json:"base_hash,omitempty"`
	SnapshotSHA256 string `json:"snapshot_sha256"`
	Summary        string `json:"summary,omitempty"`
}

// delta is what changed between two snapshots, member by member: members
// replaced (set), arrays cut at an index and continued (splice: most
// members that grow, grow at the end), members gone (drop).
type delta struct {
	Set    map[string]json.RawMessage `json:"set,omitempty"`
	Splice map[string]splice          `json:"splice,omitempty"`
	Drop   []string                   `json:"drop,omitempty"`
}

type splice struct {
	From  int               `json:"from"`
	Items []json.RawMessage `json:"items"`
}

// cpState is a checkpoint's snapshot as members, for the next delta.
type cpState struct {
	seq     int64  // its checkpoint.created event (0 until applied)
	hash    string // that event's chain hash
	sha     string // snapshot_sha256
	members map[string]json.RawMessage
	// fullSize is the size of the last full checkpoint of the chain,
	// deltaBytes the deltas written since.
	fullSize, deltaBytes int
}

// members splits a snapshot into its members and returns them with the
// SHA-256 of their canonical encoding.
func members(s Snapshot) (map[string]json.RawMessage, []byte, string, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, nil, "", err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, nil, "", err
	}
	canon, sum, err := canonical(m)
	return m, canon, sum, err
}

// canonical encodes members with sorted names, each value as it is.
func canonical(m map[string]json.RawMessage) ([]byte, string, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:]), nil
}

// NewCheckpoint returns the checkpoint of a folder's state: incremental
// on the last checkpoint the folder wrote or restored, when it has one and
// the deltas since the last full checkpoint are still smaller than it;
// full otherwise. The folder adopts it as the next base once the
// checkpoint.created event holding it is applied to it.
func NewCheckpoint(f *Folder) (Checkpoint, error) {
	s := f.Snapshot()
	m, canon, sum, err := members(s)
	if err != nil {
		return Checkpoint{}, err
	}
	cp := Checkpoint{LastSeq: s.LastSeq, LastHash: s.LastHash, SnapshotSHA256: sum,
		Summary: fmt.Sprintf("%d events, run %s %s", s.Events, s.RunID, s.RunStatus)}
	next := &cpState{sha: sum, members: m}
	if base := f.cp; base != nil && base.seq > 0 {
		d, err := json.Marshal(diff(base.members, m))
		if err != nil {
			return Checkpoint{}, err
		}
		if base.deltaBytes+len(d) < base.fullSize {
			cp.Delta, cp.BaseSeq, cp.BaseHash = string(d), base.seq, base.hash
			next.fullSize, next.deltaBytes = base.fullSize, base.deltaBytes+len(d)
			f.next = next
			return cp, nil
		}
	}
	cp.Snapshot = string(canon)
	next.fullSize = len(canon)
	f.next = next
	return cp, nil
}

// diff returns the delta from members a to b.
func diff(a, b map[string]json.RawMessage) delta {
	var d delta
	for k, v := range b {
		old, ok := a[k]
		if ok && bytes.Equal(old, v) {
			continue
		}
		if ok && len(old) > 0 && old[0] == '[' && len(v) > 0 && v[0] == '[' {
			var x, y []json.RawMessage
			if json.Unmarshal(old, &x) == nil && json.Unmarshal(v, &y) == nil {
				i := 0
				for i < len(x) && i < len(y) && bytes.Equal(x[i], y[i]) {
					i++
				}
				if d.Splice == nil {
					d.Splice = map[string]splice{}
				}
				d.Splice[k] = splice{From: i, Items: append([]json.RawMessage{}, y[i:]...)}
				continue
			}
		}
		if d.Set == nil {
			d.Set = map[string]json.RawMessage{}
		}
		d.Set[k] = v
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			d.Drop = append(d.Drop, k)
		}
	}
	return d
}

// apply returns members m changed by d (m is not modified).
func (d delta) apply(m map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage, len(m)+len(d.Set))
	for k, v := range m {
		out[k] = v
	}
	for _, k := range d.Drop {
		delete(out, k)
	}
	for k, v := range d.Set {
		out[k] = v
	}
	for k, sp := range d.Splice {
		var items []json.RawMessage
		if old, ok := out[k]; ok {
			if err := json.Unmarshal(old, &items); err != nil {
				return nil, fmt.Errorf("splice of %s: %w", k, err)
			}
		}
		if sp.From < 0 || sp.From > len(items) {
			return nil, fmt.Errorf("splice of %s at %d: the base has %d items", k, sp.From, len(items))
		}
		b, err := json.Marshal(append(items[:sp.From], sp.Items...))
		if err != nil {
			return nil, err
		}
		out[k] = b
	}
	return out, nil
}

// ErrCheckpoint is why a checkpoint cannot be used: its snapshot does not
// hash to snapshot_sha256, or it does not match the log it is in.
var ErrCheckpoint = errors.New("checkpoint does not verify")

// restore decodes and checks a checkpoint against the log prefix evs[:i]
// (the events before the checkpoint.created event at index i), following
// an incremental one back to its full checkpoint.
func restore(evs []event.Event, i int) (*Folder, int, error) {
	seq := evs[i].Seq
	var cp Checkpoint
	if err := json.Unmarshal(evs[i].Payload, &cp); err != nil || cp.Snapshot == "" && cp.Delta == "" {
		return nil, 0, fmt.Errorf("%w: seq %d: no snapshot", ErrCheckpoint, seq)
	}
	var (
		m      map[string]json.RawMessage
		raw    []byte
		state  = &cpState{seq: seq, hash: evs[i].Hash, sha: cp.SnapshotSHA256}
		deltas []delta
	)
	// Walk back to the full checkpoint, collecting the deltas.
	for at, c := i, cp; ; {
		if c.Snapshot != "" {
			sum := sha256.Sum256([]byte(c.Snapshot))
			if len(deltas) == 0 && hex.EncodeToString(sum[:]) != c.SnapshotSHA256 {
				return nil, 0, fmt.Errorf("%w: seq %d: the snapshot does not match its hash", ErrCheckpoint, seq)
			}
			if err := json.Unmarshal([]byte(c.Snapshot), &m); err != nil {
				return nil, 0, fmt.Errorf("%w: seq %d: %v", ErrCheckpoint, seq, err)
			}
			raw, state.fullSize = []byte(c.Snapshot), len(c.Snapshot)
			break
		}
		var d delta
		if err := json.Unmarshal([]byte(c.Delta), &d); err != nil {
			return nil, 0, fmt.Errorf("%w: seq %d: delta at seq %d: %v", ErrCheckpoint, seq, evs[at].Seq, err)
		}
		deltas = append(deltas, d)
		state.deltaBytes += len(c.Delta)
		j := int(c.BaseSeq - evs[0].Seq)
		if j < 0 || j >= at || evs[j].Seq != c.BaseSeq || evs[j].Hash != c.BaseHash || evs[j].Type != event.CheckpointCreated {
			return nil, 0, fmt.Errorf("%w: seq %d: its base (seq %d) is not a checkpoint of this log", ErrCheckpoint, seq, c.BaseSeq)
		}
		at, c = j, Checkpoint{}
		if err := json.Unmarshal(evs[at].Payload, &c); err != nil || c.Snapshot == "" && c.Delta == "" {
			return nil, 0, fmt.Errorf("%w: seq %d: its base at seq %d holds no snapshot", ErrCheckpoint, seq, evs[at].Seq)
		}
	}
	if len(deltas) > 0 {
		var err error
		for k := len(deltas) - 1; k >= 0; k-- {
			if m, err = deltas[k].apply(m); err != nil {
				return nil, 0, fmt.Errorf("%w: seq %d: %v", ErrCheckpoint, seq, err)
			}
		}
		canon, sum, err := canonical(m)
		if err != nil || sum != cp.SnapshotSHA256 {
			return nil, 0, fmt.Errorf("%w: seq %d: the snapshot its deltas rebuild does not match its hash", ErrCheckpoint, seq)
		}
		raw = canon
	}
	var s Snapshot
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, 0, fmt.Errorf("%w: seq %d: %v", ErrCheckpoint, seq, err)
	}
	// The events are contiguous from seq evs[0].Seq: find last_seq.
	k := int(cp.LastSeq - evs[0].Seq)
	if k < 0 || k >= i || evs[k].Seq != cp.LastSeq || evs[k].Hash != cp.LastHash || s.LastSeq != cp.LastSeq || s.LastHash != cp.LastHash {
		return nil, 0, fmt.Errorf("%w: seq %d: it does not summarise this log (last_seq %d)", ErrCheckpoint, seq, cp.LastSeq)
	}
	f := folderFrom(s)
	state.members = m
	f.cp = state
	return f, k + 1, nil
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

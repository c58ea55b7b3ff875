package viewer

import (
	"context"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
)

// List implements store.Store: the one session, on the first page.
func (f *FileStore) List(ctx context.Context, o store.ListOptions) ([]store.SessionInfo, error) {
	o, err := o.Check()
	if err != nil {
		return nil, err
	}
	all, err := f.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	return store.PageOf(all, o), nil
}

// Scan implements store.Store.
func (f *FileStore) Scan(ctx context.Context, sid string, from int64, fn func(*event.Event) error) error {
	evs, err := f.Read(ctx, sid, from)
	if err != nil {
		return err
	}
	for i := range evs {
		e := evs[i]
		if err := fn(&e); err != nil {
			return err
		}
	}
	return nil
}

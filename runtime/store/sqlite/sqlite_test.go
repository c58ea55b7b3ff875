package sqlite

import (
	"os"
	"testing"

	"github.com/agentos/agentos/runtime/event"
	"github.com/agentos/agentos/runtime/store"
	"github.com/agentos/agentos/runtime/store/storetest"
)

func open(t *testing.T, sealer *event.Sealer) store.Store {
	s, err := Open(t.TempDir(), sealer, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) { storetest.Run(t, open) }

func TestConformanceNoGroupCommit(t *testing.T) {
	storetest.Run(t, func(t *testing.T, sealer *event.Sealer) store.Store {
		s, err := Open(t.TempDir(), sealer, Options{NoGroupCommit: true})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestHelperProcess(t *testing.T) {
	if os.Getenv(storetest.CrashChildEnv) == "" {
		t.Skip("crash child only")
	}
	storetest.CrashChild(func(dir string) (store.Store, error) { return Open(dir, storetest.NewSealer(t), Options{}) })
}

func TestCrash(t *testing.T) {
	storetest.Crash(t, 50, func(dir string) (store.Store, error) { return Open(dir, storetest.NewSealer(t), Options{}) })
}

func TestSecretsNeverOnDisk(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, storetest.NewSealer(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	storetest.SeedSecrets(t, s)
	// Scan while open too: the WAL holds the write before a checkpoint.
	storetest.AssertNoSecrets(t, dir)
	s.Close()
	storetest.AssertNoSecrets(t, dir)
}

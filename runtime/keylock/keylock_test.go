package keylock

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
)

// TestMutualExclusion: holders of one key never overlap; other keys do not
// wait for it.
func TestMutualExclusion(t *testing.T) {
	var k Map
	var wg sync.WaitGroup
	inside := map[string]int{}
	var mu sync.Mutex
	for i := 0; i < 400; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			key := fmt.Sprint(i % 7)
			unlock := k.Lock(key)
			mu.Lock()
			inside[key]++
			if inside[key] != 1 {
				t.Errorf("key %s held %d times at once", key, inside[key])
			}
			mu.Unlock()
			runtime.Gosched()
			mu.Lock()
			inside[key]--
			mu.Unlock()
			unlock()
		}(i)
	}
	wg.Wait()
	if n := k.Len(); n != 0 {
		t.Errorf("%d keys left after every holder released", n)
	}
	// A held key does not block another.
	u1 := k.Lock("a")
	u2 := k.Lock("b")
	u2()
	u1()
}

// TestMemoryFlatOverSessions: 10,000 sessions locked and released one
// after another leave no entry behind and no heap growth beyond noise.
func TestMemoryFlatOverSessions(t *testing.T) {
	var k Map
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	cycle := func(from int) {
		for i := from; i < from+10000; i++ {
			k.Lock(fmt.Sprintf("owner/repo#%d", i))()
		}
	}
	cycle(0)
	before := heap()
	cycle(10000)
	cycle(20000)
	after := heap()
	if n := k.Len(); n != 0 {
		t.Fatalf("%d keys kept after their sessions ended", n)
	}
	// A map that kept its 20,000 new entries would hold well over 1 MiB.
	if after > before+256<<10 {
		t.Errorf("heap grew %d bytes over 20,000 sessions", after-before)
	}
}

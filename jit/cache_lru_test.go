package jit

import "testing"

// TestMemoryCacheKeepsMaxEntries: the in-memory cache holds exactly its
// capacity and evicts the least recently used entry first.
func TestMemoryCacheKeepsMaxEntries(t *testing.T) {
	m := newMemoryCache(2)
	a, b, c := &Output{PTX: []byte("a")}, &Output{PTX: []byte("b")}, &Output{PTX: []byte("c")}
	m.put("a", a)
	m.put("b", b)
	if got, ok := m.get("a"); !ok || got != a {
		t.Fatalf("a after two puts: %v %v", got, ok)
	}
	if got, ok := m.get("b"); !ok || got != b {
		t.Fatalf("b after two puts: %v %v", got, ok)
	}
	m.get("a") // b is now the least recently used
	m.put("c", c)
	if _, ok := m.get("b"); ok {
		t.Errorf("b was not evicted")
	}
	for key, want := range map[string]*Output{"a": a, "c": c} {
		if got, ok := m.get(key); !ok || got != want {
			t.Errorf("%s after eviction: %v %v", key, got, ok)
		}
	}
	// Putting a key again replaces its output without evicting anything.
	a2 := &Output{PTX: []byte("a2")}
	m.put("a", a2)
	if got, _ := m.get("a"); got != a2 {
		t.Errorf("a replaced: %v", got)
	}
	if _, ok := m.get("c"); !ok {
		t.Errorf("replacing a evicted c")
	}
}

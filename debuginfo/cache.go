package debuginfo

import (
	"container/list"
	"sync"
	"time"

	"github.com/tandem-profiler/tandem/schema"
)

// doNotRetry is parca-agent's do-not-retry LRU: file ids that must not be
// uploaded again, forever (expires zero) or until a deadline. Safe for
// concurrent use.
type doNotRetry struct {
	mu    sync.Mutex
	max   int
	ll    *list.List // front = most recently used; values are *dnrEntry
	items map[schema.FileID]*list.Element
	now   func() time.Time
}

type dnrEntry struct {
	id      schema.FileID
	expires time.Time // zero: never
}

func newDoNotRetry(max int, now func() time.Time) *doNotRetry {
	return &doNotRetry{max: max, ll: list.New(), items: make(map[schema.FileID]*list.Element), now: now}
}

// add remembers id for ttl (0: forever), replacing an earlier entry.
func (c *doNotRetry) add(id schema.FileID, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var exp time.Time
	if ttl > 0 {
		exp = c.now().Add(ttl)
	}
	if e, ok := c.items[id]; ok {
		e.Value.(*dnrEntry).expires = exp
		c.ll.MoveToFront(e)
		return
	}
	c.items[id] = c.ll.PushFront(&dnrEntry{id: id, expires: exp})
	for c.ll.Len() > c.max {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.items, old.Value.(*dnrEntry).id)
	}
}

// contains reports whether id is (still) not to be retried.
func (c *doNotRetry) contains(id schema.FileID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[id]
	if !ok {
		return false
	}
	ent := e.Value.(*dnrEntry)
	if !ent.expires.IsZero() && !c.now().Before(ent.expires) {
		c.ll.Remove(e)
		delete(c.items, id)
		return false
	}
	c.ll.MoveToFront(e)
	return true
}

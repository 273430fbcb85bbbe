package images

import (
	"container/list"
	"sync"
)

// Cache holds image bytes by SHA-256, least recently used first out,
// bounded in bytes. The key is the content's hash, so an entry can never
// go stale: a file that changes is another image. It is safe for
// concurrent use.
type Cache struct {
	mu    sync.Mutex
	max   int64
	size  int64
	order *list.List // of *cacheEntry, most recent at the front
	byKey map[string]*list.Element
}

type cacheEntry struct {
	key  string
	data []byte
}

// NewCache returns a cache holding at most maxBytes of images.
func NewCache(maxBytes int64) *Cache {
	return &Cache{max: maxBytes, order: list.New(), byKey: map[string]*list.Element{}}
}

// Get returns the bytes of the image with that SHA-256, if held. The
// slice is shared: callers must not change it.
func (c *Cache) Get(sha string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[sha]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*cacheEntry).data, true
}

// Put keeps data under sha, evicting the least recently used entries
// to stay within the bound. An image larger than the bound is not kept.
func (c *Cache) Put(sha string, data []byte) {
	if c == nil || int64(len(data)) > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[sha]; ok {
		c.order.MoveToFront(e)
		return
	}
	c.byKey[sha] = c.order.PushFront(&cacheEntry{key: sha, data: data})
	c.size += int64(len(data))
	for c.size > c.max {
		last := c.order.Back()
		ent := last.Value.(*cacheEntry)
		c.order.Remove(last)
		delete(c.byKey, ent.key)
		c.size -= int64(len(ent.data))
	}
}

// Len returns how many images the cache holds.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

package groupcommit

// Queued returns the requests queued under key, not yet taken by a flush.
func (g *Group[K, Req, Res]) Queued(key K) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if q := g.queues[key]; q != nil {
		return len(q.items)
	}
	return 0
}

// Gathering reports whether key is gathering before its next flush.
func (g *Group[K, Req, Res]) Gathering(key K) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := g.queues[key]
	return q != nil && q.gathering
}

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

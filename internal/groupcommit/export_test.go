package groupcommit

// Gathering reports whether key is gathering before its next flush.
func (g *Group[K, Req, Res]) Gathering(key K) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := g.queues[key]
	return q != nil && q.gathering
}

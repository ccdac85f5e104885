package note

// QueuedIncrements returns how many combined increments of the note are
// queued and not yet taken by an upsert; 0 when combining is off.
func (s *Service) QueuedIncrements(noteID string) int {
	if s.combine == nil {
		return 0
	}
	return s.combine.Queued(noteID)
}

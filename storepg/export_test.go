package storepg

// QueuedUpdates returns how many Updates wait for a transaction to take
// them into (see combine.go), for tests that line Updates up.
func QueuedUpdates(s *Store) int {
	s.comb.mu.Lock()
	defer s.comb.mu.Unlock()
	return len(s.comb.queue)
}

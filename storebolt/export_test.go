package storebolt

import "go.etcd.io/bbolt"

// QueueLen reports how many Updates wait for the writer. Tests use it to
// build a batch deterministically.
func QueueLen(s *Store) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// SetCommit replaces the function that commits a write transaction, so that
// tests can count commits or make them fail. Call it before the Updates it
// should affect.
func SetCommit(s *Store, commit func(*bbolt.Tx) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commit = commit
}

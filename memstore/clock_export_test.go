package memstore

// Clock is the store's time, Unix ns, as its decisions read it: a test
// measuring a span in the store's time reads it before and after (the
// cached clock never goes back, but may lag the wall clock by more than
// its resolution when its goroutine waits for a CPU).
func (s *Store) Clock() int64 { return s.clock() }

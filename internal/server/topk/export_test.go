package topk

// ShardOf is the index of the shard that counts key: the hash seed is
// random per TopK (an attacker cannot aim keys at one shard), so a test
// that needs keys placed per shard asks the TopK it built.
func (t *TopK) ShardOf(key string) int {
	if len(key) > t.maxKey {
		key = key[:t.maxKey]
	}
	s := t.shardFor(key)
	for i := range t.shards {
		if &t.shards[i] == s {
			return i
		}
	}
	panic("topk: a key's shard is not the TopK's")
}

// ShardCounters is the number of counters of shard i.
func (t *TopK) ShardCounters(i int) int { return len(t.shards[i].slab) }

// ShardTotal is the number of records shard i has counted.
func (t *TopK) ShardTotal(i int) uint64 {
	s := &t.shards[i]
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

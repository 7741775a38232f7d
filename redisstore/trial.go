package redisstore

import "github.com/sluicehq/sluice/internal/redislink"

// trial sends c, a caller's trial of a node whose breaker is open
// (redislink.Node.Allow), alone (batcher.sendAlone): it holds no batch
// worker while the node stays silent, and its outcome closes the breaker
// (the node answered) or keeps it open, whenever it comes. The caller
// waits, whatever its context, until c is finished: by Redis's answer or
// the client's error, or by the watchdog at c's deadline, as a queued
// call. It returns false when the store is closed.
func (s *Store) trial(g group, c *call) bool {
	if g.slot >= nodeGroup {
		g.slot = redislink.Slot(c.key) // one call, one slot
	}
	if !s.batch.sendAlone(g, c) {
		return false
	}
	s.trials.Add(1)
	<-c.done
	return true
}

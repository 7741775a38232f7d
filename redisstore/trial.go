package redisstore

import (
	"time"

	"github.com/sluicehq/sluice/internal/redislink"
)

// trial runs c, a caller's trial of a node whose breaker is open
// (redislink.Node.Allow), alone and in the caller's goroutine: it holds no
// batch worker while the node stays silent, and its outcome closes the
// breaker (the node answered) or keeps it open. It waits for Redis up to
// the store's Timeout, whatever the caller's context: the breaker needs
// the answer. c is finished on return.
func (s *Store) trial(g group, c *call) {
	if g.slot >= nodeGroup {
		g.slot = redislink.Slot(c.key) // one call, one slot
	}
	var sc scratch
	ds, err := s.exec(g, []*call{c}, &sc, time.Now().Add(s.opts.Timeout))
	s.batch.scriptCalls.Add(1)
	s.batch.requests.Add(1)
	s.trials.Add(1)
	s.finish([]*call{c}, ds, err)
	<-c.done
}

-- Peek: reclaim the expired leases and return the weight in flight.
return reap()

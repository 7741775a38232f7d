package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/redislink"

	"github.com/sluicehq/sluice/ratelimit"
)

// Node batches (a Redis Cluster). A script call's declared keys must share
// one hash slot, so with many keys a batch per slot carries one decision
// and costs a node tens of microseconds of CPU for it. A call declaring one
// key (for the client to route it) and passing the others in ARGV may touch
// every key its node serves (lua/node.lua), so the batcher groups a
// Cluster's calls by the node owning their slots, as the store last read
// the slot map (CLUSTER SLOTS), and a batch of several slots goes as one
// such call. A stale map costs nothing but a retry: node.lua reads every
// key before the script writes anything, a key the node does not serve
// fails the call there, and the batch goes again one call per slot (which
// the client routes, following MOVED and ASK as usual) while the map is
// read again.

// nodeGroup is the first group.slot that names a node rather than a slot:
// nodeGroup + the node's index in the slot map.
const nodeGroup = 16384

// nodeState is a Cluster store's reads of the slot map (which the link
// keeps, with each node's breaker) and its node scripts.
type nodeState struct {
	reading atomic.Bool  // a read of the map is under way
	last    atomic.Int64 // when the last read started, Unix ns
	splits  atomic.Uint64
	scripts [numShapes]*rueidis.Lua
}

// nodeSources are the shapes' scripts behind lua/node.lua.
var nodeSources = func() (out [numShapes]string) {
	pre := luaFile("node.lua")
	for i, src := range scriptSources {
		out[i] = pre + "\n" + src
	}
	return out
}()

// minMapReads is the least time between two reads of the slot map.
const minMapReads = 500 * time.Millisecond

// route returns the group of a Cluster call on slot sl, and the breaker
// of its node: its node's, when the slot map is known, else the slot's
// (and the map is read).
func (s *Store) route(sh shape, sl uint16) (group, *redislink.Node) {
	n, node := s.link.For(sl)
	if n != 0 {
		return group{shape: sh, slot: nodeGroup + n - 1}, node
	}
	s.readSlots()
	return group{shape: sh, slot: sl}, node
}

// readSlots reads the slot map in the background, unless a read is under
// way or one started less than minMapReads ago.
func (s *Store) readSlots() {
	now := time.Now().UnixNano()
	if now-s.nodes.last.Load() < int64(minMapReads) || !s.nodes.reading.CompareAndSwap(false, true) {
		return
	}
	s.nodes.last.Store(now)
	go func() {
		defer s.nodes.reading.Store(false)
		cn := s.conn.Load()
		if cn == nil || !cn.cluster || s.closed.Load() {
			return
		}
		ctx, cancel := context.WithTimeout(s.life, max(s.opts.Timeout, time.Second))
		defer cancel()
		m, addrs, err := fetchSlots(ctx, cn.client)
		if err == nil {
			s.link.SetSlots(m, addrs)
		}
	}()
}

// fetchSlots reads a Cluster's slot map with CLUSTER SLOTS. Nodes are
// numbered in the order of the reply.
func fetchSlots(ctx context.Context, client rueidis.Client) (*redislink.Slots, []string, error) {
	ranges, err := client.Do(ctx, client.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		return nil, nil, err
	}
	return parseSlots(ranges)
}

// parseSlots reads a CLUSTER SLOTS reply: per range, its first and last
// slot, then its master as [host, port, id, …], then the replicas. The
// nodes are named host:port, as the client names its connections.
func parseSlots(ranges []rueidis.RedisMessage) (*redislink.Slots, []string, error) {
	m := &redislink.Slots{}
	index := map[string]uint16{}
	var addrs []string
	for _, r := range ranges {
		f, err := r.ToArray()
		if err != nil || len(f) < 3 {
			return nil, nil, fmt.Errorf("redisstore: CLUSTER SLOTS: a range is not [first, last, master, …]")
		}
		lo, err1 := f[0].AsInt64()
		hi, err2 := f[1].AsInt64()
		master, err3 := f[2].ToArray()
		if err1 != nil || err2 != nil || err3 != nil || len(master) < 2 || lo < 0 || hi < lo || hi > 16383 {
			return nil, nil, fmt.Errorf("redisstore: CLUSTER SLOTS: malformed range")
		}
		host, _ := master[0].ToString()
		port, _ := master[1].AsInt64()
		name := net.JoinHostPort(host, strconv.FormatInt(port, 10))
		n, ok := index[name]
		if !ok {
			if len(index) >= 65535-nodeGroup {
				return nil, nil, fmt.Errorf("redisstore: CLUSTER SLOTS: too many nodes")
			}
			n = uint16(len(index) + 1)
			index[name] = n
			addrs = append(addrs, name)
		}
		for sl := lo; sl <= hi; sl++ {
			m.Of[sl] = n
		}
	}
	return m, addrs, nil
}

// misrouted reports whether err says a node batch touched a key its node
// does not serve now: the call failed before the script wrote anything.
func misrouted(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	if !ok {
		return false
	}
	msg := re.Error()
	if _, moved := re.IsMoved(); moved {
		return true
	}
	if _, ask := re.IsAsk(); ask {
		return true
	}
	return re.IsTryAgain() || strings.HasPrefix(msg, "CROSSSLOT") ||
		strings.Contains(msg, "non local key") || strings.Contains(msg, "do not hash to the same slot")
}

// errMisrouted is exec's error for a node batch that misrouted refused.
var errMisrouted = errors.New("redisstore: a node batch touched a key its node does not serve")

// nodeArgs returns the ARGV of a node batch (lua/node.lua): the number of
// keys, the command that reads one, the keys, then the script's ARGV.
func (s *Store) nodeArgs(sh shape, sc *scratch) []string {
	probe := "GET"
	if sh == shapeLog || s.packs(sh) {
		probe = "EXISTS" // the packed layout's keys are not keys (packed.go)
	}
	args := append(sc.nargs[:0], strconv.Itoa(len(sc.keys)), probe)
	args = append(args, sc.keys...)
	args = append(args, sc.args...)
	sc.nargs = args
	return args
}

// execNode runs a batch grouped by node. When its calls share one slot it
// is a slot's batch; else it goes as one node call, and again one call per
// slot when that call finds a key its node does not serve: a slot whose
// call fails has its calls finished with the error here, the others are
// decided. calls is the number of script calls sent.
func (s *Store) execNode(g group, batch []*call, sc *scratch, deadline time.Time) (ds []ratelimit.Decision, calls int, err error) {
	first := redislink.Slot(batch[0].key)
	one := true
	for _, c := range batch[1:] {
		if redislink.Slot(c.key) != first {
			one = false
			break
		}
	}
	if one {
		ds, err = s.exec(group{shape: g.shape, slot: first}, batch, sc, deadline)
		return ds, 1, err
	}
	ds, err = s.exec(g, batch, sc, deadline)
	if !errors.Is(err, errMisrouted) {
		return ds, 1, err
	}
	// The map is stale: read it again, and send each slot's calls alone,
	// in their order.
	s.nodes.splits.Add(1)
	s.readSlots()
	out := make([]ratelimit.Decision, len(batch))
	done := make([]bool, len(batch))
	calls = 1
	part, at := make([]*call, 0, len(batch)), make([]int, 0, len(batch))
	for i, c := range batch {
		if done[i] {
			continue
		}
		sl := redislink.Slot(c.key)
		part, at = part[:0], at[:0]
		for j := i; j < len(batch); j++ {
			if !done[j] && redislink.Slot(batch[j].key) == sl {
				part, at = append(part, batch[j]), append(at, j)
				done[j] = true
			}
		}
		pds, err := s.exec(group{shape: g.shape, slot: sl}, part, sc, deadline)
		calls++
		if err != nil {
			// These calls fail alone; the other slots' stand.
			s.finish(part, nil, err)
			continue
		}
		for k, j := range at {
			out[j] = pds[k]
		}
	}
	return out, calls, nil
}

package rls

import (
	"context"
	"sync"
	"unicode/utf8"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The wire form of the call, without protobuf reflection.
//
// proto.Unmarshal of a one-descriptor RateLimitRequest took about 0.8 µs
// and 8 allocations, proto.Marshal of its answer 0.3 µs: a tenth of what
// sluice rls spends on a call at saturation. The lean gRPC server
// (h2grpc) decodes a request and encodes an answer through the
// UnmarshalWire and AppendWire methods below when the handler's types
// have them; grpc-go's server sees the embedded generated messages.
//
// Only what Envoy sends is decoded here: a domain, descriptors of
// key/value entries, a request hits_addend. Any other field, wire type,
// malformed or non-UTF-8 string, or a message above wireMaxRequest goes
// to proto.Unmarshal, which decides it (and its error) as before. An
// answer with anything beyond overall_code and plain statuses (headers,
// dynamic metadata, quota, raw body) is encoded by proto.Marshal. The
// differential tests (wire_test.go) hold both to the generated code.

// wireMaxRequest is the largest request the fast decoder takes: its
// strings share one allocation, which a string kept after the call (a
// metric label, a log sample) keeps alive whole.
const wireMaxRequest = 1024

// wireRequest is a RateLimitRequest decoded into memory of its own,
// reused from call to call (wireRequests).
type wireRequest struct {
	*pb.RateLimitRequest // &req

	req     pb.RateLimitRequest
	descs   []commonpb.RateLimitDescriptor
	dptrs   []*commonpb.RateLimitDescriptor
	entries []commonpb.RateLimitDescriptor_Entry
	eptrs   []*commonpb.RateLimitDescriptor_Entry

	viaProto bool // decoded by proto.Unmarshal
}

var wireRequests = sync.Pool{New: func() any {
	w := &wireRequest{}
	w.RateLimitRequest = &w.req
	return w
}}

// reset forgets the last request, keeping the memory.
func (w *wireRequest) reset() {
	w.req = pb.RateLimitRequest{}
	w.viaProto = false
	clear(w.dptrs)
	clear(w.eptrs)
	for i := range w.descs {
		w.descs[i] = commonpb.RateLimitDescriptor{}
	}
	for i := range w.entries {
		w.entries[i] = commonpb.RateLimitDescriptor_Entry{}
	}
}

// UnmarshalWire decodes b into w: itself when it can, else with
// proto.Unmarshal.
func (w *wireRequest) UnmarshalWire(b []byte) error {
	w.reset()
	if len(b) <= wireMaxRequest && w.decode(b) {
		return nil
	}
	w.reset()
	w.viaProto = true
	return proto.Unmarshal(b, &w.req)
}

// wireScan walks a request's fields and reports whether it has only what
// decode takes: with count set, it counts descriptors and entries, and
// the string bytes; else it fills w, with strings cut from str.
type wireScan struct {
	descs, entries, strBytes int
	str                      string
	off                      int // next unused byte of str
}

// decode is UnmarshalWire's own decoder, reporting whether b was of the
// shape it takes.
func (w *wireRequest) decode(b []byte) bool {
	var sc wireScan
	if !sc.request(b, nil) {
		return false
	}
	w.descs = growTo(w.descs, sc.descs)
	w.dptrs = growTo(w.dptrs, sc.descs)
	w.entries = growTo(w.entries, sc.entries)
	w.eptrs = growTo(w.eptrs, sc.entries)
	if sc.strBytes > 0 {
		// One allocation for every string of the request.
		buf := make([]byte, 0, sc.strBytes)
		sc.str = string(appendStrings(buf, b))
	}
	sc.descs, sc.entries = 0, 0
	return sc.request(b, w)
}

// growTo returns s with length n, reusing its array when large enough.
func growTo[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// request scans a RateLimitRequest; with w nil it counts, else it fills w.
func (sc *wireScan) request(b []byte, w *wireRequest) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType: // domain
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || !utf8.Valid(v) {
				return false
			}
			b = b[n:]
			s := sc.take(v, w != nil)
			if w != nil {
				w.req.Domain = s
			}
		case num == 2 && typ == protowire.BytesType: // descriptors
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return false
			}
			b = b[n:]
			var d *commonpb.RateLimitDescriptor
			if w != nil {
				d = &w.descs[sc.descs]
				w.dptrs[sc.descs] = d
			}
			if !sc.descriptor(v, w, d) {
				return false
			}
			sc.descs++
		case num == 3 && typ == protowire.VarintType: // hits_addend
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return false
			}
			b = b[n:]
			if w != nil {
				w.req.HitsAddend = uint32(v)
			}
		default:
			return false
		}
	}
	if w != nil && sc.descs > 0 {
		w.req.Descriptors = w.dptrs[:sc.descs:sc.descs]
	}
	return true
}

// descriptor scans one descriptor into d (nil when counting).
func (sc *wireScan) descriptor(b []byte, w *wireRequest, d *commonpb.RateLimitDescriptor) bool {
	first := sc.entries
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num != 1 || typ != protowire.BytesType {
			return false // only entries: a limit override or hits go to proto.Unmarshal
		}
		b = b[n:]
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		var e *commonpb.RateLimitDescriptor_Entry
		if w != nil {
			e = &w.entries[sc.entries]
			w.eptrs[sc.entries] = e
		}
		if !sc.entry(v, e) {
			return false
		}
		sc.entries++
	}
	if d != nil && sc.entries > first {
		d.Entries = w.eptrs[first:sc.entries:sc.entries]
	}
	return true
}

// entry scans one key/value entry into e (nil when counting).
func (sc *wireScan) entry(b []byte, e *commonpb.RateLimitDescriptor_Entry) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || (num != 1 && num != 2) || typ != protowire.BytesType {
			return false
		}
		b = b[n:]
		v, n := protowire.ConsumeBytes(b)
		if n < 0 || !utf8.Valid(v) {
			return false
		}
		b = b[n:]
		s := sc.take(v, e != nil)
		if e == nil {
			continue
		}
		if num == 1 {
			e.Key = s
		} else {
			e.Value = s
		}
	}
	return true
}

// take returns v as a string cut from sc.str when filling, and counts its
// bytes when counting.
func (sc *wireScan) take(v []byte, fill bool) string {
	if !fill {
		sc.strBytes += len(v)
		return ""
	}
	s := sc.str[sc.off : sc.off+len(v)]
	sc.off += len(v)
	return s
}

// appendStrings appends the request b's strings (domain, then each
// entry's key and value), in the order wireScan.request takes them. b has
// been scanned already: it is well formed.
func appendStrings(buf, b []byte) []byte {
	for len(b) > 0 {
		num, _, n := protowire.ConsumeTag(b)
		b = b[n:]
		switch num {
		case 1:
			v, n := protowire.ConsumeBytes(b)
			buf, b = append(buf, v...), b[n:]
		case 2:
			d, n := protowire.ConsumeBytes(b)
			b = b[n:]
			for len(d) > 0 {
				_, _, n := protowire.ConsumeTag(d)
				e, m := protowire.ConsumeBytes(d[n:])
				d = d[n+m:]
				for len(e) > 0 {
					_, _, n := protowire.ConsumeTag(e)
					v, m := protowire.ConsumeBytes(e[n:])
					buf, e = append(buf, v...), e[n+m:]
				}
			}
		case 3:
			_, n := protowire.ConsumeVarint(b)
			b = b[n:]
		}
	}
	return buf
}

// wireResponse is an answer that encodes itself (AppendWire).
type wireResponse struct{ *pb.RateLimitResponse }

// AppendWire appends r's wire form to b: its own encoding when r has only
// overall_code and plain statuses, else proto.Marshal's. Both give the
// same bytes.
func (r wireResponse) AppendWire(b []byte) ([]byte, error) {
	m := r.RateLimitResponse
	if !plainResponse(m) {
		return proto.MarshalOptions{}.MarshalAppend(b, m)
	}
	if m.OverallCode != 0 {
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(m.OverallCode))
	}
	for _, st := range m.Statuses {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(statusSize(st)))
		b = appendStatus(b, st)
	}
	return b, nil
}

// plainResponse reports whether AppendWire encodes m itself.
func plainResponse(m *pb.RateLimitResponse) bool {
	if m.ResponseHeadersToAdd != nil || m.RequestHeadersToAdd != nil || m.RawBody != nil ||
		m.DynamicMetadata != nil || m.Quota != nil || unknown(m) {
		return false
	}
	for _, st := range m.Statuses {
		if st == nil || st.Quota != nil || unknown(st) {
			return false
		}
		if l := st.CurrentLimit; l != nil && (unknown(l) || (l.UnitMultiplier != nil && unknown(l.UnitMultiplier))) {
			return false
		}
		if d := st.DurationUntilReset; d != nil && unknown(d) {
			return false
		}
	}
	return true
}

// unknown reports whether m carries unknown fields (which proto.Marshal
// writes).
func unknown(m proto.Message) bool { return len(m.ProtoReflect().GetUnknown()) > 0 }

func varintField(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(v)
}

func messageField(num protowire.Number, size int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(size)
}

func limitSize(l *pb.RateLimitResponse_RateLimit) int {
	n := varintField(1, uint64(l.RequestsPerUnit)) + varintField(2, uint64(l.Unit))
	if l.Name != "" {
		n += protowire.SizeTag(3) + protowire.SizeBytes(len(l.Name))
	}
	if m := l.UnitMultiplier; m != nil {
		n += messageField(4, varintField(1, uint64(m.Value)))
	}
	return n
}

func resetSize(s, ns int64) int {
	return varintField(1, uint64(s)) + varintField(2, uint64(int64(int32(ns))))
}

func statusSize(st *pb.RateLimitResponse_DescriptorStatus) int {
	n := varintField(1, uint64(st.Code))
	if l := st.CurrentLimit; l != nil {
		n += messageField(2, limitSize(l))
	}
	n += varintField(3, uint64(st.LimitRemaining))
	if d := st.DurationUntilReset; d != nil {
		n += messageField(4, resetSize(d.Seconds, int64(d.Nanos)))
	}
	return n
}

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	return protowire.AppendVarint(protowire.AppendTag(b, num, protowire.VarintType), v)
}

func appendStatus(b []byte, st *pb.RateLimitResponse_DescriptorStatus) []byte {
	b = appendVarintField(b, 1, uint64(st.Code))
	if l := st.CurrentLimit; l != nil {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(limitSize(l)))
		b = appendVarintField(b, 1, uint64(l.RequestsPerUnit))
		b = appendVarintField(b, 2, uint64(l.Unit))
		if l.Name != "" {
			b = protowire.AppendTag(b, 3, protowire.BytesType)
			b = protowire.AppendString(b, l.Name)
		}
		if m := l.UnitMultiplier; m != nil {
			b = protowire.AppendTag(b, 4, protowire.BytesType)
			b = protowire.AppendVarint(b, uint64(varintField(1, uint64(m.Value))))
			b = appendVarintField(b, 1, uint64(m.Value))
		}
	}
	b = appendVarintField(b, 3, uint64(st.LimitRemaining))
	if d := st.DurationUntilReset; d != nil {
		b = protowire.AppendTag(b, 4, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(resetSize(d.Seconds, int64(d.Nanos))))
		b = appendVarintField(b, 1, uint64(d.Seconds))
		b = appendVarintField(b, 2, uint64(int64(d.Nanos)))
	}
	return b
}

// serviceDesc is the rate limit service as Register adds it: the
// generated description, with a ShouldRateLimit handler that decodes into
// a reused wireRequest and answers with a wireResponse.
var serviceDesc = func() grpc.ServiceDesc {
	d := pb.RateLimitService_ServiceDesc
	d.Methods = []grpc.MethodDesc{{MethodName: "ShouldRateLimit", Handler: shouldRateLimitHandler}}
	return d
}()

// shouldRateLimitHandler is the generated handler of ShouldRateLimit but
// for the types: the request's memory is reused once the call is
// answered (unless an interceptor, which might keep it, is in the way).
func shouldRateLimitHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	s := srv.(*Server)
	if interceptor != nil {
		in := &wireRequest{}
		in.RateLimitRequest = &in.req
		if err := dec(in); err != nil {
			return nil, err
		}
		info := &grpc.UnaryServerInfo{Server: srv, FullMethod: pb.RateLimitService_ShouldRateLimit_FullMethodName}
		return interceptor(ctx, in.RateLimitRequest, info, func(ctx context.Context, req any) (any, error) {
			return s.ShouldRateLimit(ctx, req.(*pb.RateLimitRequest))
		})
	}
	// Put back as it is, but for a request proto.Unmarshal made (as
	// large as the server takes): the next UnmarshalWire resets it, and
	// until then it keeps strings of at most wireMaxRequest bytes alive.
	in := wireRequests.Get().(*wireRequest)
	defer func() {
		if in.viaProto {
			in.reset()
		}
		wireRequests.Put(in)
	}()
	if err := dec(in); err != nil {
		return nil, err
	}
	resp, err := s.ShouldRateLimit(ctx, in.RateLimitRequest)
	if err != nil {
		return nil, err
	}
	return wireResponse{resp}, nil
}

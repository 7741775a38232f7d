package rls

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	corepb "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func wireDesc(kv ...string) *commonpb.RateLimitDescriptor {
	d := &commonpb.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &commonpb.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// wireRequests are requests of every shape the decoder takes itself, and
// of shapes it leaves to proto.Unmarshal.
func wireTestRequests() []*pb.RateLimitRequest {
	o := wireDesc("user", "o")
	o.Limit = &commonpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 3, Unit: typepb.RateLimitUnit_HOUR, UnitMultiplier: wrapperspb.UInt32(2)}
	h := wireDesc("path", "/x")
	h.HitsAddend = wrapperspb.UInt64(0)
	n := wireDesc("k", "v")
	n.IsNegativeHits = true
	reqs := []*pb.RateLimitRequest{
		{},
		{Domain: "bench"},
		{Domain: "bench", Descriptors: []*commonpb.RateLimitDescriptor{wireDesc("load", "k42")}},
		{Domain: "d", HitsAddend: 7, Descriptors: []*commonpb.RateLimitDescriptor{wireDesc("a", "1", "b", "2"), {}, wireDesc("", ""), wireDesc("c", "")}},
		{Domain: "ünïcödé", Descriptors: []*commonpb.RateLimitDescriptor{wireDesc("ключ", "値")}},
		{Domain: "d", Descriptors: []*commonpb.RateLimitDescriptor{o, wireDesc("free", "f")}},
		{Domain: "d", Descriptors: []*commonpb.RateLimitDescriptor{h}},
		{Domain: "d", Descriptors: []*commonpb.RateLimitDescriptor{n}},
		{Domain: "d", HitsAddend: math.MaxUint32, Descriptors: []*commonpb.RateLimitDescriptor{wireDesc("big", string(bytes.Repeat([]byte("x"), 2000)))}},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		r := &pb.RateLimitRequest{Domain: "dom" + strconv.Itoa(rng.IntN(3)), HitsAddend: uint32(rng.IntN(3))}
		for range rng.IntN(5) {
			var kv []string
			for range rng.IntN(4) {
				kv = append(kv, "key"+strconv.Itoa(rng.IntN(9)), "v"+strconv.Itoa(rng.IntN(1000)))
			}
			r.Descriptors = append(r.Descriptors, wireDesc(kv...))
		}
		reqs = append(reqs, r)
	}
	return reqs
}

// checkWireDecode decodes b with UnmarshalWire into w (reused) and with
// proto.Unmarshal, and fails unless both fail or both give equal
// messages.
func checkWireDecode(t *testing.T, w *wireRequest, b []byte) {
	t.Helper()
	var want pb.RateLimitRequest
	wantErr := proto.Unmarshal(b, &want)
	err := w.UnmarshalWire(b)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("UnmarshalWire(%x) = %v, proto.Unmarshal %v", b, err, wantErr)
	}
	if err == nil && !proto.Equal(w.RateLimitRequest, &want) {
		t.Fatalf("UnmarshalWire(%x) = %v, proto.Unmarshal %v", b, w.RateLimitRequest, &want)
	}
}

// TestWireDecode: the request the wire decoder makes is the one
// proto.Unmarshal makes, from one reused wireRequest (nothing of a
// request stays for the next), and from bytes that are not a request
// (cut short, other fields, bad UTF-8) it fails as proto.Unmarshal does.
func TestWireDecode(t *testing.T) {
	w := wireRequests.Get().(*wireRequest)
	for _, r := range wireTestRequests() {
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		checkWireDecode(t, w, b)
		for i := range b {
			checkWireDecode(t, w, b[:i])
		}
	}
	for _, b := range [][]byte{
		protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "\xff\xfe"), // domain not UTF-8
		protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1),         // domain of the wrong wire type
		protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), 1),         // unknown field, kept by proto
		protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.VarintType), 1<<40),     // hits_addend past uint32
		protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType),
			protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType),
				protowire.AppendString(protowire.AppendTag(nil, 2, protowire.BytesType), "\xc3"))), // value not UTF-8
		{0x0a, 0x80}, // a length cut short
		{0x00},       // field number 0
	} {
		checkWireDecode(t, w, b)
	}
}

// FuzzWireDecode holds the wire decoder to proto.Unmarshal on arbitrary
// bytes.
func FuzzWireDecode(f *testing.F) {
	for _, r := range wireTestRequests()[:9] {
		b, _ := proto.Marshal(r)
		f.Add(b)
	}
	w := &wireRequest{}
	w.RateLimitRequest = &w.req
	f.Fuzz(func(t *testing.T, b []byte) { checkWireDecode(t, w, b) })
}

// TestWireEncode: AppendWire writes the bytes proto.Marshal writes, for
// answers it encodes itself and for those it leaves to proto.
func TestWireEncode(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	u32 := func() uint32 {
		switch rng.IntN(4) {
		case 0:
			return 0
		case 1:
			return math.MaxUint32
		}
		return uint32(rng.IntN(1 << uint(rng.IntN(32))))
	}
	var resps []*pb.RateLimitResponse
	for i := range 300 {
		r := &pb.RateLimitResponse{OverallCode: pb.RateLimitResponse_Code(rng.IntN(3))}
		for range rng.IntN(4) {
			st := &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_Code(rng.IntN(3)), LimitRemaining: u32()}
			if rng.IntN(4) > 0 {
				st.CurrentLimit = &pb.RateLimitResponse_RateLimit{RequestsPerUnit: u32(), Unit: pb.RateLimitResponse_RateLimit_Unit(rng.IntN(8))}
				if rng.IntN(3) == 0 {
					st.CurrentLimit.Name = "rule-" + strconv.Itoa(rng.IntN(100))
				}
				if rng.IntN(3) == 0 {
					st.CurrentLimit.UnitMultiplier = wrapperspb.UInt32(u32())
				}
			}
			if rng.IntN(4) > 0 {
				st.DurationUntilReset = &durationpb.Duration{Seconds: int64(rng.IntN(1<<uint(rng.IntN(40)))) - int64(rng.IntN(2)), Nanos: int32(rng.IntN(3)) - 1}
			}
			r.Statuses = append(r.Statuses, st)
		}
		switch i % 10 {
		case 1:
			r.ResponseHeadersToAdd = []*corepb.HeaderValue{{Key: "x-ratelimit-limit", Value: "3"}}
		case 2:
			r.DynamicMetadata, _ = structpb.NewStruct(map[string]any{"domain": "d"})
		case 3:
			r.RawBody = []byte("over")
		}
		resps = append(resps, r)
	}
	for _, r := range resps {
		want, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := wireResponse{r}.AppendWire([]byte("prefix"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[6:], want) || string(got[:6]) != "prefix" {
			t.Fatalf("AppendWire(%v) = %x, proto.Marshal %x", r, got[6:], want)
		}
	}
}

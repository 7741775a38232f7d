package dist

import (
	"context"
	"errors"
	"fmt"

	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// BehaviorGlobal is gubernator's GLOBAL behavior: every peer answers from
// its own copy of the counter and sends the hits to the key's owner
// asynchronously. Without it a peer that does not own a key forwards the
// request to the owner (batched) and answers with the owner's decision.
const BehaviorGlobal = 2

// Target is how one contender's requests are written and sent: the load
// client dials each instance with Dial and sends Request's bytes.
type Target struct {
	// Request returns a request for one hit on the counter key/value
	// whose limit is limit a second (sluice has its limits in its
	// configuration, and ignores it).
	Request func(key, value string, limit int64) ([]byte, error)
	Dial    func(addr string) (Conn, error)
	// ClockWindows: its one-second windows start on the second (sluice's
	// fixed windows); otherwise at a counter's first hit (gubernator's
	// token bucket, refilled whole when its duration is over).
	ClockWindows bool
}

// Conn is a connection to one instance.
type Conn interface {
	// Call sends req and says whether the answer admits it.
	Call(ctx context.Context, req []byte) (admitted bool, err error)
	Close() error
}

// grpcDial returns a Dial for gRPC method, its answers read by decode.
func grpcDial(method string, decode func([]byte) (bool, error)) func(string) (Conn, error) {
	return func(addr string) (Conn, error) {
		c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
		return grpcConn{c, method, decode}, err
	}
}

type grpcConn struct {
	*grpc.ClientConn
	method string
	decode func([]byte) (bool, error)
}

func (c grpcConn) Call(ctx context.Context, req []byte) (bool, error) {
	var resp []byte
	if err := c.Invoke(ctx, c.method, req, &resp); err != nil {
		return false, err
	}
	return c.decode(resp)
}

// Sluice returns the target of `sluice rls` (Envoy's
// RateLimitService.ShouldRateLimit, domain "dist").
func Sluice() Target {
	return Target{
		ClockWindows: true,
		Request: func(key, value string, _ int64) ([]byte, error) {
			return proto.Marshal(&pb.RateLimitRequest{Domain: "dist", Descriptors: []*commonpb.RateLimitDescriptor{
				{Entries: []*commonpb.RateLimitDescriptor_Entry{{Key: key, Value: value}}},
			}})
		},
		Dial: grpcDial("/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", func(b []byte) (bool, error) {
			var r pb.RateLimitResponse
			if err := proto.Unmarshal(b, &r); err != nil {
				return false, err
			}
			switch r.OverallCode {
			case pb.RateLimitResponse_OK:
				return true, nil
			case pb.RateLimitResponse_OVER_LIMIT:
				return false, nil
			}
			return false, fmt.Errorf("sluice rls: code %v", r.OverallCode)
		}),
	}
}

// Gubernator returns the target of gubernator's V1.GetRateLimits: one
// request a call, name key, unique_key value, one hit, TOKEN_BUCKET over
// 1000 ms, with behavior. The messages are written with protowire from the
// field numbers of gubernator.proto (RateLimitReq: name 1, unique_key 2,
// hits 3, limit 4, duration 5, algorithm 6, behavior 7; RateLimitResp:
// status 1, error 5), which keeps gubernator's module and its
// dependencies out of this one.
func Gubernator(behavior int64) Target {
	return Target{
		Request: func(key, value string, limit int64) ([]byte, error) {
			var r []byte
			r = protowire.AppendTag(r, 1, protowire.BytesType)
			r = protowire.AppendString(r, key)
			r = protowire.AppendTag(r, 2, protowire.BytesType)
			r = protowire.AppendString(r, value)
			for _, f := range []struct {
				n protowire.Number
				v int64
			}{{3, 1}, {4, limit}, {5, 1000}, {7, behavior}} {
				r = protowire.AppendTag(r, f.n, protowire.VarintType)
				r = protowire.AppendVarint(r, uint64(f.v))
			}
			var m []byte
			m = protowire.AppendTag(m, 1, protowire.BytesType)
			return protowire.AppendBytes(m, r), nil
		},
		Dial: grpcDial("/pb.gubernator.V1/GetRateLimits", decodeGubernator),
	}
}

// decodeGubernator reads GetRateLimitsResp's first RateLimitResp.
func decodeGubernator(b []byte) (bool, error) {
	_, resp := field(b, 1)
	if resp == nil {
		return false, errors.New("gubernator: no response")
	}
	if _, e := field(resp, 5); len(e) > 0 {
		return false, errors.New("gubernator: " + string(e))
	}
	status, _ := field(resp, 1)
	return status == 0, nil // UNDER_LIMIT
}

// field returns the field num of the message b: its value when it is a
// varint, its bytes when it is length-delimited (zero values when absent).
func field(b []byte, num protowire.Number) (uint64, []byte) {
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return 0, nil
		}
		b = b[l:]
		switch {
		case n == num && typ == protowire.VarintType:
			v, _ := protowire.ConsumeVarint(b)
			return v, nil
		case n == num && typ == protowire.BytesType:
			s, _ := protowire.ConsumeBytes(b)
			return 0, s
		}
		if l = protowire.ConsumeFieldValue(n, typ, b); l < 0 {
			return 0, nil
		}
		b = b[l:]
	}
	return 0, nil
}

// rawCodec passes messages through as bytes: requests are marshalled once
// ahead, answers decoded by the target.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, fmt.Errorf("rawCodec: %T is not []byte", v)
	}
	return b, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("rawCodec: %T is not *[]byte", v)
	}
	*p = append((*p)[:0], data...)
	return nil
}

func (rawCodec) Name() string { return "proto" }

package rls

import (
	commonpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// dynamicMetadata is envoyproxy/ratelimit's RESPONSE_DYNAMIC_METADATA (its
// ratelimitToMetadata): the request's domain, its descriptors (entries as
// "key=value", a limit override, a hits_addend), its hits_addend, and the
// metadata of the rules of the descriptors that passed, merged (a key
// already set wins, unless both values are mappings, which merge).
func dynamicMetadata(req *pb.RateLimitRequest, checks []check, resp *pb.RateLimitResponse) *structpb.Struct {
	fields := map[string]*structpb.Value{"domain": structpb.NewStringValue(req.GetDomain())}
	descs := make([]*structpb.Value, 0, len(req.GetDescriptors()))
	for _, d := range req.GetDescriptors() {
		if d != nil {
			descs = append(descs, structpb.NewStructValue(descriptorStruct(d)))
		}
	}
	fields["descriptors"] = structpb.NewListValue(&structpb.ListValue{Values: descs})
	if h := req.GetHitsAddend(); h != 0 {
		fields["hitsAddend"] = structpb.NewNumberValue(float64(h))
	}
	passed := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for i := range checks {
		c := &checks[i]
		if c.Kind != kindLimited || c.Rule == nil || c.Rule.Metadata == nil || i >= len(resp.Statuses) ||
			resp.Statuses[i].GetCode() == pb.RateLimitResponse_OVER_LIMIT {
			continue
		}
		if m, err := structpb.NewStruct(c.Rule.Metadata); err == nil {
			mergeMetadata(passed, m)
		}
	}
	if len(passed.Fields) > 0 {
		fields["metadata"] = structpb.NewStructValue(passed)
	}
	return &structpb.Struct{Fields: fields}
}

func descriptorStruct(d *commonpb.RateLimitDescriptor) *structpb.Struct {
	entries := make([]*structpb.Value, 0, len(d.GetEntries()))
	for _, e := range d.GetEntries() {
		entries = append(entries, structpb.NewStringValue(e.GetKey()+"="+e.GetValue()))
	}
	f := map[string]*structpb.Value{"entries": structpb.NewListValue(&structpb.ListValue{Values: entries})}
	if l := d.GetLimit(); l != nil {
		f["limit"] = structpb.NewStringValue(l.String())
	}
	if h := d.GetHitsAddend(); h != nil {
		f["hitsAddend"] = structpb.NewNumberValue(float64(h.GetValue()))
	}
	return &structpb.Struct{Fields: f}
}

// mergeMetadata merges src into dst: a key dst has keeps its value, unless
// both are mappings, which merge the same way.
func mergeMetadata(dst, src *structpb.Struct) {
	for k, v := range src.GetFields() {
		have, ok := dst.Fields[k]
		if !ok {
			dst.Fields[k] = v
			continue
		}
		if hs, ss := have.GetStructValue(), v.GetStructValue(); hs != nil && ss != nil {
			mergeMetadata(hs, ss)
		}
	}
}

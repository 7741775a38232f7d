package main

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
)

// reflect asks sluice rls at addr, with grpc-go's reflection client (v1),
// for its services and for the file of RateLimitService.
func reflect(t *testing.T, addr string) (services []string, file *descriptorpb.FileDescriptorProto, err error) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := rpb.NewServerReflectionClient(conn).ServerReflectionInfo(context.Background())
	if err != nil {
		return nil, nil, err
	}
	defer stream.CloseSend()
	ask := func(req *rpb.ServerReflectionRequest) (*rpb.ServerReflectionResponse, error) {
		if err := stream.Send(req); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		return stream.Recv()
	}
	// Both on one stream, the second sent after the first's answer, as
	// grpcurl asks.
	resp, err := ask(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}})
	if err != nil {
		return nil, nil, err
	}
	for _, s := range resp.GetListServicesResponse().GetService() {
		services = append(services, s.GetName())
	}
	resp, err = ask(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_FileContainingSymbol{
		FileContainingSymbol: "envoy.service.ratelimit.v3.RateLimitService"}})
	if err != nil {
		return services, nil, err
	}
	fds := resp.GetFileDescriptorResponse().GetFileDescriptorProto()
	if len(fds) == 0 {
		t.Fatalf("FileContainingSymbol: no file: %v", resp)
	}
	file = &descriptorpb.FileDescriptorProto{}
	if err := proto.Unmarshal(fds[0], file); err != nil {
		t.Fatal(err)
	}
	return services, file, nil
}

// TestRLSReflection: with --grpc-reflection, on either gRPC server,
// grpc-go's reflection client lists the rate limit, health and reflection
// services and gets RateLimitService's file; without it, on either server,
// the reflection service is Unimplemented.
func TestRLSReflection(t *testing.T) {
	args := []string{"--config-dir", rlsConfigDir(t), "--grpc-listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}
	for _, impl := range []string{"lean", "grpc-go"} {
		t.Run("on/"+impl, func(t *testing.T) {
			grpcAddr, _, logs := startRLS(t, append(args, "--grpc-server", impl, "--grpc-reflection")...)
			services, file, err := reflect(t, grpcAddr)
			if err != nil {
				t.Fatalf("reflection: %v", err)
			}
			for _, want := range []string{"envoy.service.ratelimit.v3.RateLimitService", "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"} {
				if !slices.Contains(services, want) {
					t.Errorf("services %v lack %s", services, want)
				}
			}
			if file.GetName() != "envoy/service/ratelimit/v3/rls.proto" || len(file.GetService()) != 1 || file.GetService()[0].GetName() != "RateLimitService" {
				t.Errorf("RateLimitService's file: %s with %v", file.GetName(), file.GetService())
			}
			if !strings.Contains(logs.String(), "grpc_reflection=true") {
				t.Errorf("the start line does not say reflection is on:\n%s", logs)
			}
		})
	}
	t.Run("env", func(t *testing.T) {
		t.Setenv("SLUICE_GRPC_REFLECTION", "true")
		grpcAddr, _, _ := startRLS(t, args...)
		if _, _, err := reflect(t, grpcAddr); err != nil {
			t.Errorf("reflection with SLUICE_GRPC_REFLECTION=true: %v", err)
		}
	})
	for _, impl := range []string{"lean", "grpc-go"} {
		t.Run("off/"+impl, func(t *testing.T) {
			grpcAddr, _, _ := startRLS(t, append(args, "--grpc-server", impl)...)
			if _, _, err := reflect(t, grpcAddr); grpcstatus.Code(err) != codes.Unimplemented {
				t.Errorf("reflection without --grpc-reflection: %v, want Unimplemented", err)
			}
		})
	}
}

package h2grpc_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/sluicehq/sluice/internal/testharness/testcerts"
	"github.com/sluicehq/sluice/internal/transport/h2grpc"
)

// server is what the benchmark needs of h2grpc's and grpc-go's servers.
type server interface {
	grpc.ServiceRegistrar
	Serve(net.Listener) error
	Stop()
}

// BenchmarkUnary makes unary calls from many goroutines over one
// connection, to this server and to grpc-go's, with grpc-go's client: the
// client's cost is the same in both, so the difference is the servers'.
// bench/rls measures the server's CPU alone, in its own process.
func BenchmarkUnary(b *testing.B) {
	ca := testcerts.NewCA("bench CA")
	srvTLS := &tls.Config{Certificates: []tls.Certificate{ca.Server("bench").TLS()}}
	cliTLS := credentials.NewTLS(&tls.Config{RootCAs: ca.Pool()})
	for _, impl := range []struct {
		name  string
		new   func() server
		creds credentials.TransportCredentials
	}{
		{"h2grpc", func() server { return h2grpc.NewServer(h2grpc.Options{}) }, insecure.NewCredentials()},
		{"grpc-go", func() server { return grpc.NewServer() }, insecure.NewCredentials()},
		// With Guard, as sluice rls --grpc-server grpc-go serves: its
		// cost is reading the frames as they pass.
		{"grpc-go-guard", func() server {
			return grpc.NewServer(grpc.Creds(h2grpc.Guard(insecure.NewCredentials(), h2grpc.Options{})))
		}, insecure.NewCredentials()},
		// Over TLS 1.3: the record layer's cost on both sides.
		{"h2grpc-tls", func() server { return h2grpc.NewServer(h2grpc.Options{TLS: srvTLS}) }, cliTLS},
		{"grpc-go-tls", func() server { return grpc.NewServer(grpc.Creds(credentials.NewTLS(srvTLS))) }, cliTLS},
	} {
		b.Run(impl.name, func(b *testing.B) {
			srv := impl.new()
			testpb.RegisterTestServiceServer(srv, &testService{})
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			go srv.Serve(lis)
			defer srv.Stop()
			conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(impl.creds))
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			client := testpb.NewTestServiceClient(conn)
			req := &testpb.SimpleRequest{ResponseSize: 64, Payload: payload(64)}
			b.SetParallelism(16)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := client.UnaryCall(context.Background(), req); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

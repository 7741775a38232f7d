package runner

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/reflection"
	v1reflectiongrpc "google.golang.org/grpc/reflection/grpc_reflection_v1"
	v1alphareflectiongrpc "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
)

// services registers on a gRPC server and keeps what was registered: the
// reflection service's list of services, the same on grpc-go's server and
// h2grpc's (which has no GetServiceInfo).
type services struct {
	grpc.ServiceRegistrar
	info map[string]grpc.ServiceInfo
}

func newServices(g grpc.ServiceRegistrar) *services {
	return &services{ServiceRegistrar: g, info: map[string]grpc.ServiceInfo{}}
}

// RegisterService registers desc on the server and keeps its methods.
func (s *services) RegisterService(desc *grpc.ServiceDesc, impl any) {
	s.ServiceRegistrar.RegisterService(desc, impl)
	si := grpc.ServiceInfo{Metadata: desc.Metadata}
	for _, m := range desc.Methods {
		si.Methods = append(si.Methods, grpc.MethodInfo{Name: m.MethodName})
	}
	for _, m := range desc.Streams {
		si.Methods = append(si.Methods, grpc.MethodInfo{Name: m.StreamName, IsClientStream: m.ClientStreams, IsServerStream: m.ServerStreams})
	}
	s.info[desc.ServiceName] = si
}

// GetServiceInfo is what was registered, by service name.
func (s *services) GetServiceInfo() map[string]grpc.ServiceInfo { return s.info }

// registerReflection adds gRPC server reflection (grpc.reflection.v1 and
// v1alpha, as grpcurl and grpc-go's reflection clients ask either) to s:
// it lists s's services and describes them from protoregistry.GlobalFiles,
// where the generated packages (go-control-plane's envoy protos, grpc's
// health) register their files.
func registerReflection(s *services) {
	opts := reflection.ServerOptions{Services: s}
	v1reflectiongrpc.RegisterServerReflectionServer(s, reflection.NewServerV1(opts))
	v1alphareflectiongrpc.RegisterServerReflectionServer(s, reflection.NewServer(opts))
}

package h2grpc

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
)

// Options configures a Server. The zero value serves with the defaults.
type Options struct {
	// MaxConcurrentStreams bounds the calls a connection may have open at
	// once, counting calls a client has reset whose handlers have not
	// returned yet. Default 1000.
	MaxConcurrentStreams uint32
	// MaxRecvMsgSize bounds a request message, in bytes; a larger one is
	// answered RESOURCE_EXHAUSTED. Default 4 MiB, as grpc-go's.
	MaxRecvMsgSize int
	// MaxHeaderListSize bounds a request's header list as HTTP/2 counts
	// it (names, values and 32 bytes a field). Default 64 KiB.
	MaxHeaderListSize uint32
	// Workers bounds the goroutines kept to run handlers. A call that
	// finds none waiting gets a new goroutine, which stays on as a worker
	// while there are fewer than Workers: a worker's stack has grown
	// already, and growing a new goroutine's (runtime.copystack) cost 5%
	// of the server's CPU in bench/rls. Default 1024.
	Workers int
	// Logger receives connection errors, at debug level. Default: none.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxConcurrentStreams == 0 {
		o.MaxConcurrentStreams = 1000
	}
	if o.MaxRecvMsgSize <= 0 {
		o.MaxRecvMsgSize = 4 << 20
	}
	if o.MaxHeaderListSize == 0 {
		o.MaxHeaderListSize = 64 << 10
	}
	if o.Workers <= 0 {
		o.Workers = 1024
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// ErrServerStopped is what Serve returns when called after Stop or
// GracefulStop.
var ErrServerStopped = errors.New("h2grpc: the server has been stopped")

// Server is a gRPC server. Register services on it, then Serve.
type Server struct {
	opts Options

	mu        sync.Mutex
	methods   map[string]*method // by path, /package.Service/Method
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	serving   bool
	stopped   bool
	draining  bool
	work      chan *stream
	workers   atomic.Int32
	connWG    sync.WaitGroup // connections' goroutines
	workerWG  sync.WaitGroup
}

// method is one registered method.
type method struct {
	impl   any
	unary  grpc.MethodHandler
	stream *grpc.StreamDesc
	name   string // the full path, for errors
}

// NewServer returns a server with no services.
func NewServer(o Options) *Server {
	return &Server{
		opts:      o.withDefaults(),
		methods:   map[string]*method{},
		listeners: map[net.Listener]struct{}{},
		conns:     map[*conn]struct{}{},
	}
}

// RegisterService registers impl's methods as desc describes them, as
// grpc.Server's RegisterService does; it implements
// grpc.ServiceRegistrar, so generated Register functions take a Server. It
// panics if impl does not implement desc's interface, if a method is
// registered twice, or after Serve.
func (s *Server) RegisterService(desc *grpc.ServiceDesc, impl any) {
	if impl != nil {
		ht := reflect.TypeOf(desc.HandlerType).Elem()
		if st := reflect.TypeOf(impl); !st.Implements(ht) {
			panic(fmt.Sprintf("h2grpc: RegisterService: %v does not implement %v", st, ht))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.serving {
		panic("h2grpc: RegisterService after Serve")
	}
	add := func(name string, m *method) {
		path := "/" + desc.ServiceName + "/" + name
		if _, dup := s.methods[path]; dup {
			panic("h2grpc: RegisterService: " + path + " registered twice")
		}
		m.name = path
		s.methods[path] = m
	}
	for _, md := range desc.Methods {
		add(md.MethodName, &method{impl: impl, unary: md.Handler})
	}
	for i := range desc.Streams {
		sd := &desc.Streams[i]
		add(sd.StreamName, &method{impl: impl, stream: sd})
	}
}

// Serve accepts connections on lis and serves each until Stop or
// GracefulStop, after which it returns nil. It closes lis when it returns.
func (s *Server) Serve(lis net.Listener) error {
	s.mu.Lock()
	if s.stopped || s.draining {
		s.mu.Unlock()
		lis.Close()
		return ErrServerStopped
	}
	if !s.serving {
		s.serving = true
		s.work = make(chan *stream)
	}
	s.listeners[lis] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, lis)
		s.mu.Unlock()
		lis.Close()
	}()

	var delay time.Duration
	for {
		nc, err := lis.Accept()
		if err != nil {
			s.mu.Lock()
			done := s.stopped || s.draining
			s.mu.Unlock()
			if done {
				return nil
			}
			if temporary(err) {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		s.mu.Lock()
		if s.stopped || s.draining {
			s.mu.Unlock()
			nc.Close()
			return nil
		}
		c := newConn(s, nc)
		s.conns[c] = struct{}{}
		s.connWG.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.connWG.Done()
			c.serve()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// temporary reports whether an Accept error is worth waiting out (a
// timeout, or running out of file descriptors), as net/http judges it.
func temporary(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	t, ok := err.(interface{ Temporary() bool })
	return ok && t.Temporary()
}

// worker runs st's handler, then those of the calls handed to it until
// the server stops.
func (s *Server) worker(st *stream, work <-chan *stream) {
	defer s.workerWG.Done()
	st.run()
	for st := range work {
		st.run()
	}
}

// dispatch runs st's handler on a waiting worker, else on a new
// goroutine, which stays on as a worker if there are fewer than
// Options.Workers.
func (s *Server) dispatch(st *stream) {
	select {
	case s.work <- st:
		return
	default:
	}
	if s.workers.Add(1) <= int32(s.opts.Workers) {
		s.workerWG.Add(1)
		go s.worker(st, s.work)
		return
	}
	s.workers.Add(-1)
	go st.run()
}

// Stop closes every listener and connection at once: calls in flight are
// canceled. It returns when every connection's goroutines and handlers
// have returned.
func (s *Server) Stop() { s.shutdown(&s.stopped, (*conn).abort) }

// GracefulStop stops accepting connections, tells every client (GOAWAY)
// that no new call will be taken, and returns when the calls in flight
// have finished and the connections have closed.
func (s *Server) GracefulStop() { s.shutdown(&s.draining, (*conn).drain) }

// shutdown sets flag, closes the listeners, ends every connection with
// end, and waits for the connections and the workers to finish.
func (s *Server) shutdown(flag *bool, end func(*conn)) {
	s.mu.Lock()
	*flag = true
	for lis := range s.listeners {
		lis.Close()
	}
	for c := range s.conns {
		end(c)
	}
	s.mu.Unlock()
	s.connWG.Wait()
	s.stopWorkers()
}

func (s *Server) stopWorkers() {
	s.mu.Lock()
	if s.work != nil {
		close(s.work)
		s.work = nil
	}
	s.mu.Unlock()
	s.workerWG.Wait()
}

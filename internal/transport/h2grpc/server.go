package h2grpc

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/sluicehq/sluice/algorithm/gcra"
	"github.com/sluicehq/sluice/ratelimit"
)

// Options configures a Server. The zero value serves with the defaults,
// under which one connection holds at most 40 MiB (see the package
// documentation for the arithmetic).
type Options struct {
	// MaxConcurrentStreams bounds the calls a connection may have open at
	// once, counting calls a client has reset whose handlers have not
	// returned yet; a stream past it is refused (RST_STREAM
	// REFUSED_STREAM). Default 256.
	MaxConcurrentStreams uint32
	// MaxRecvMsgSize bounds a request message, in bytes; a larger one is
	// answered RESOURCE_EXHAUSTED. Default 4 MiB, as grpc-go's.
	MaxRecvMsgSize int
	// MaxHeaderListSize bounds a request's header list as HTTP/2 counts
	// it (names, values and 32 bytes a field). Default 64 KiB.
	MaxHeaderListSize uint32
	// InitialWindowSize is each stream's receive window: what a client
	// may send on a stream before the server grants more, which it does
	// only for a request message larger than the window (the credit for
	// the rest of that message, out of the connection's window). Default,
	// and least, 65535, HTTP/2's own: a client may send that much before
	// it has read the server's SETTINGS.
	InitialWindowSize int32
	// InitialConnWindowSize is the connection's receive window: the bytes
	// of requests a connection may hold, received and not yet consumed. A
	// request's bytes are given back (WINDOW_UPDATE) once its handler has
	// returned, never on receipt. Default 32 MiB; raised to at least
	// MaxConcurrentStreams × max(InitialWindowSize, 64 KiB) +
	// MaxRecvMsgSize + 5 - InitialWindowSize + 64 KiB, so that every
	// stream's window and one message of the largest size fit in it at
	// once and a client that keeps to the windows never waits on the
	// connection's while a stream can send (2 GiB at most).
	InitialConnWindowSize int32
	// MaxSendQueue bounds the bytes of frames queued for a client that
	// reads them slower than handlers answer: a handler's frames wait
	// (SendMsg, or the end of its call) while the queue is full. The
	// server's own frames (acknowledgements, WINDOW_UPDATE, RST_STREAM)
	// may take it 1 MiB further, past which a client that does not read
	// loses the connection. Default 4 MiB.
	MaxSendQueue int
	// Workers bounds the goroutines kept to run handlers. A call that
	// finds none waiting gets a new goroutine, which stays on as a worker
	// while there are fewer than Workers: a worker's stack has grown
	// already, and growing a new goroutine's (runtime.copystack) cost 5%
	// of the server's CPU in bench/rls. Default 1024.
	Workers int
	// Logger receives connection errors, at debug level. Default: none.
	Logger *slog.Logger
	// Metadata names the request headers (lower case) a handler's context
	// carries as incoming metadata (metadata.FromIncomingContext), such
	// as the W3C trace context's traceparent and tracestate. Default:
	// none, and a call's context is the server's own, allocated with its
	// stream; with a header present, the context costs an allocation or
	// three more.
	Metadata []string

	// TLS, when set, serves TLS: the handshake (within the 20 s a new
	// connection has to send its preface) must negotiate ALPN "h2", else
	// the connection is closed, as gRPC over TLS requires (RFC 9113
	// section 3.2). The server offers "h2" alone: NextProtos is replaced
	// in a copy of TLS, and a config returned by its GetConfigForClient
	// must offer "h2" itself (tlsreload's does when told to).
	TLS *tls.Config
	// MaxConnectionAge, when positive, ends a connection after about that
	// long (±10% at random, as grpc-go's keepalive, so that clients that
	// connected together do not reconnect together): it gets a GOAWAY,
	// calls in flight finish, and the client opens a new connection for
	// the next — which lets a load balancer spread long-lived clients
	// such as Envoy over new instances. MaxConnectionAgeGrace, when
	// positive, bounds how long the calls in flight then have before the
	// connection is closed; zero waits for them.
	MaxConnectionAge, MaxConnectionAgeGrace time.Duration
	// MaxConnectionIdle, when positive, ends a connection that has made
	// no progress for that long (checked every MaxConnectionIdle, so after
	// one to two of it) with a GOAWAY, so that connections a client
	// opened and left do not hold slots of a bounded listener forever.
	// Progress is a request received whole, or a handler running: a
	// stream whose request never ends, or one the client opens and resets,
	// does not keep a connection busy.
	MaxConnectionIdle time.Duration

	StreamLimits
}

// StreamLimits make every stream of a connection progress, and bound how
// fast a client may reset them. A connection with a stream stalled past
// RequestTimeout or WriteTimeout, or past its resets, is ended: its slot
// (LimitListener) is free again. The timeouts are checked four times
// per the shorter of them, so a stalled stream ends its connection
// between one and one and a quarter of its timeout.
type StreamLimits struct {
	// RequestTimeout bounds the time from a call's HEADERS until its
	// request has arrived whole (END_STREAM); past it the connection gets
	// GOAWAY NO_ERROR "stalled_request" and is closed. Default 5 s
	// (Envoy writes a request at once, and waits 20 ms for its answer);
	// negative: none.
	RequestTimeout time.Duration
	// WriteTimeout bounds the time one write of a call's answer (its
	// headers, a message, its end) may wait on the client: for flow
	// control window, a zero SETTINGS_INITIAL_WINDOW_SIZE included, or for
	// room in the send queue; past it the connection gets GOAWAY NO_ERROR
	// "stalled_write" and is closed. A write to the socket that has not
	// returned after WriteTimeout closes the connection at once. Default
	// 5 s; negative: none.
	WriteTimeout time.Duration
	// ResetRate bounds the streams a second a client may reset, with
	// ResetBurst at once: its RST_STREAM on a stream the server still
	// serves, and the streams the server resets for the client's errors.
	// Past it the connection gets GOAWAY ENHANCE_YOUR_CALM and is closed.
	// Default 200 a second, burst 1000 (nghttp2's burst; its rate is 33):
	// Envoy resets each call it gives up on, and an Envoy whose calls
	// time out for a moment is not to be cut off. Negative: none.
	ResetRate, ResetBurst int
}

// Defaults of StreamLimits.
const (
	DefaultRequestTimeout = 5 * time.Second
	DefaultWriteTimeout   = 5 * time.Second
	DefaultResetRate      = 200
	DefaultResetBurst     = 1000
)

// WithDefaults returns l with its zero fields set to the defaults.
func (l StreamLimits) WithDefaults() StreamLimits {
	if l.RequestTimeout == 0 {
		l.RequestTimeout = DefaultRequestTimeout
	}
	if l.WriteTimeout == 0 {
		l.WriteTimeout = DefaultWriteTimeout
	}
	if l.ResetRate == 0 {
		l.ResetRate = DefaultResetRate
	}
	if l.ResetBurst == 0 {
		l.ResetBurst = DefaultResetBurst
	}
	return l
}

// ticks are StreamLimits in ticks of the watchdog that checks them.
type ticks struct {
	tick           time.Duration // 0: no timeout to check
	request, write uint32        // the timeouts in ticks; 0: none
	resets         gcra.Params
	boundResets    bool
}

// ticks derives the watchdog's period and the reset bound from l (with
// defaults).
func (l StreamLimits) ticks() ticks {
	var t ticks
	for _, d := range []time.Duration{l.RequestTimeout, l.WriteTimeout} {
		if d > 0 && (t.tick == 0 || d/4 < t.tick) {
			t.tick = max(d/4, 1)
		}
	}
	in := func(d time.Duration) uint32 {
		if d <= 0 || t.tick <= 0 {
			return 0
		}
		return uint32(min((d+t.tick-1)/t.tick, 1<<30))
	}
	t.request, t.write = in(l.RequestTimeout), in(l.WriteTimeout)
	if l.ResetRate > 0 && l.ResetBurst > 0 {
		t.boundResets = true
		t.resets = gcra.NewParams(ratelimit.Limit{Rate: int64(l.ResetRate), Period: time.Second, Burst: int64(l.ResetBurst)})
	}
	return t
}

const (
	// defaultWindow is HTTP/2's initial stream window, the least the
	// server gives a stream.
	defaultWindow = 65535
	// maxWindow is the largest flow-control window HTTP/2 allows.
	maxWindow = 1<<31 - 1
	// windowUpdateAt: the connection's credit goes back to the client
	// once this much has been consumed.
	windowUpdateAt = 64 << 10
	// bodyBufMax is the largest request buffer kept for reuse (bufs), so
	// the most a stream's buffer takes beyond its window.
	bodyBufMax = 64 << 10
	// controlSlack is how far past MaxSendQueue the server's own frames
	// may take the queue before the connection is closed.
	controlSlack = 1 << 20
)

// limits are a server's flow-control figures, derived from its Options.
type limits struct {
	streamWin int64 // each stream's initial receive window
	connWin   int64 // the connection's receive window
	reserve   int64 // the part of connWin granted to large messages
	sendQueue int   // Options.MaxSendQueue
	ticks
}

func (o Options) withDefaults() Options {
	if o.MaxConcurrentStreams == 0 {
		o.MaxConcurrentStreams = 256
	}
	if o.MaxRecvMsgSize <= 0 {
		o.MaxRecvMsgSize = 4 << 20
	}
	o.MaxRecvMsgSize = min(o.MaxRecvMsgSize, maxWindow-5)
	if o.MaxHeaderListSize == 0 {
		o.MaxHeaderListSize = 64 << 10
	}
	o.InitialWindowSize = max(o.InitialWindowSize, defaultWindow)
	if o.InitialConnWindowSize <= 0 {
		o.InitialConnWindowSize = 32 << 20
	}
	if o.MaxSendQueue <= 0 {
		o.MaxSendQueue = 4 << 20
	}
	if o.Workers <= 0 {
		o.Workers = 1024
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.StreamLimits = o.StreamLimits.WithDefaults()
	if o.TLS != nil {
		o.TLS = o.TLS.Clone()
		o.TLS.NextProtos = []string{"h2"}
	}
	return o
}

// limits derives the windows from o (with defaults): every stream's
// window, with its buffer's rounding to bodyBufMax, plus one message of
// the largest size, plus the credit not yet given back, fit in the
// connection's window. What is left over goes to large messages.
func (o Options) limits() limits {
	w := int64(o.InitialWindowSize)
	streams := int64(o.MaxConcurrentStreams) * max(w, bodyBufMax)
	large := max(int64(o.MaxRecvMsgSize)+5-w, 0)
	conn := min(max(int64(o.InitialConnWindowSize), streams+large+windowUpdateAt), maxWindow)
	return limits{
		streamWin: w,
		connWin:   conn,
		reserve:   max(conn-streams-windowUpdateAt, large),
		sendQueue: o.MaxSendQueue,
		ticks:     o.StreamLimits.ticks(),
	}
}

// ErrServerStopped is what Serve returns when called after Stop or
// GracefulStop.
var ErrServerStopped = errors.New("h2grpc: the server has been stopped")

// Server is a gRPC server. Register services on it, then Serve.
type Server struct {
	opts Options
	lim  limits

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
	o = o.withDefaults()
	return &Server{
		opts:      o,
		lim:       o.limits(),
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
		if s.opts.TLS != nil {
			nc = tls.Server(nc, s.opts.TLS)
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
	d := newDecoder()
	st.run(d)
	for st := range work {
		st.run(d)
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
	go st.run(nil)
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

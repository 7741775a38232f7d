package gateway

import "sync"

// proxyBufferSize is the size of the buffers the proxy copies response
// bodies through: ReverseProxy's own default.
const proxyBufferSize = 32 << 10

var proxyBufferPool = sync.Pool{New: func() any { return new([proxyBufferSize]byte) }}

// proxyBuffers is the proxy's BufferPool. Without one, ReverseProxy
// allocates a 32 KiB buffer for every response it copies, which was
// four fifths of the bytes the gateway allocated per proxied request.
// The pool holds array pointers, so that neither Get nor Put allocates.
type proxyBuffers struct{}

func (proxyBuffers) Get() []byte { return proxyBufferPool.Get().(*[proxyBufferSize]byte)[:] }

func (proxyBuffers) Put(b []byte) {
	if cap(b) == proxyBufferSize {
		proxyBufferPool.Put((*[proxyBufferSize]byte)(b[:proxyBufferSize]))
	}
}

package h2grpc

import (
	"encoding/base64"
	"strconv"
	"strings"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// HPACK encoding (RFC 7541), the little of it the server needs. The server
// never adds to its dynamic table: every field it sends is either a
// static-table entry or a literal without indexing. The first header block
// on a connection starts by setting the dynamic table's size to 0, so that
// no later SETTINGS_HEADER_TABLE_SIZE from the peer can leave the encoder
// above the peer's limit.

// appendInt appends i as an HPACK integer with an n-bit prefix, the first
// byte's high bits being first (§5.1).
func appendInt(b []byte, first byte, n uint, i uint64) []byte {
	max := uint64(1)<<n - 1
	if i < max {
		return append(b, first|byte(i))
	}
	b = append(b, first|byte(max))
	i -= max
	for i >= 128 {
		b = append(b, byte(i&0x7f)|0x80)
		i >>= 7
	}
	return append(b, byte(i))
}

// appendString appends s as an HPACK string literal, without Huffman
// coding (§5.2).
func appendString(b []byte, s string) []byte {
	b = appendInt(b, 0, 7, uint64(len(s)))
	return append(b, s...)
}

// appendLiteral appends the field name: value as a literal without
// indexing, with a literal name (§6.2.2).
func appendLiteral(b []byte, name, value string) []byte {
	b = append(b, 0)
	b = appendString(b, name)
	return appendString(b, value)
}

// appendLiteralIndexed appends a field whose name is the static table's
// entry idx, as a literal without indexing (§6.2.2).
func appendLiteralIndexed(b []byte, idx uint64, value string) []byte {
	b = appendInt(b, 0, 4, idx)
	return appendString(b, value)
}

const (
	hpackStatus200    = 0x88 // :status 200, static entry 8 (§6.1)
	hpackContentType  = 31   // the static entry named content-type
	hpackTableSizeOff = 0x20 // dynamic table size update to 0 (§6.3)
)

// Header blocks every response uses, encoded once.
var (
	// okHeaders: :status 200, content-type application/grpc.
	okHeaders = appendLiteralIndexed([]byte{hpackStatus200}, hpackContentType, "application/grpc")
	// okTrailers: grpc-status 0.
	okTrailers = appendLiteral(nil, "grpc-status", "0")
)

// appendFrameHeader appends an HTTP/2 frame header (RFC 9113 §4.1).
func appendFrameHeader(b []byte, length int, typ http2.FrameType, flags http2.Flags, stream uint32) []byte {
	return append(b, byte(length>>16), byte(length>>8), byte(length),
		byte(typ), byte(flags),
		byte(stream>>24)&0x7f, byte(stream>>16), byte(stream>>8), byte(stream))
}

// appendUint32 appends v big-endian.
func appendUint32(b []byte, v uint32) []byte {
	return append(b, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// appendStatusFields appends the fields of a call's status: grpc-status,
// grpc-message and, when the status has details, grpc-status-details-bin.
func appendStatusFields(b []byte, st *status.Status) []byte {
	b = appendLiteral(b, "grpc-status", strconv.Itoa(int(st.Code())))
	if msg := st.Message(); msg != "" {
		b = appendLiteral(b, "grpc-message", encodeGRPCMessage(msg))
	}
	if p := st.Proto(); len(p.GetDetails()) > 0 {
		if bin, err := proto.Marshal(p); err == nil {
			b = appendLiteral(b, "grpc-status-details-bin", base64.RawStdEncoding.EncodeToString(bin))
		}
	}
	return b
}

// appendMetadata appends md's fields, binary values (keys ending -bin)
// base64-encoded as gRPC's wire format requires. Reserved names (those
// starting with ':' or "grpc-") are left out.
func appendMetadata(b []byte, md metadata.MD) []byte {
	for k, vs := range md {
		if k == "" || k[0] == ':' || strings.HasPrefix(k, "grpc-") {
			continue
		}
		bin := strings.HasSuffix(k, "-bin")
		for _, v := range vs {
			if bin {
				v = base64.RawStdEncoding.EncodeToString([]byte(v))
			}
			b = appendLiteral(b, k, v)
		}
	}
	return b
}

// encodeGRPCMessage percent-encodes msg as grpc-message requires: bytes
// outside printable ASCII, and '%' itself.
func encodeGRPCMessage(msg string) string {
	clean := true
	for i := 0; i < len(msg); i++ {
		if c := msg[i]; c < 0x20 || c > 0x7e || c == '%' {
			clean = false
			break
		}
	}
	if clean {
		return msg
	}
	const hex = "0123456789ABCDEF"
	var sb strings.Builder
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c < 0x20 || c > 0x7e || c == '%' {
			sb.WriteByte('%')
			sb.WriteByte(hex[c>>4])
			sb.WriteByte(hex[c&0xf])
		} else {
			sb.WriteByte(c)
		}
	}
	return sb.String()
}

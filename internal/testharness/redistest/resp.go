package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// ReplyError is an error reply (-ERR …) from the server.
type ReplyError string

func (e ReplyError) Error() string { return "redistest: server replied " + string(e) }

// Do sends one command on a new connection and returns the reply: a string
// for simple and bulk strings, int64 for integers, []any for arrays, nil
// for a nil reply, and a ReplyError for an error reply. It is meant for
// setup and inspection, not for load: each call dials.
func (s *Server) Do(args ...string) (any, error) { return s.DoDB(0, args...) }

// DoDB is Do in database db (SELECT db first, on the same connection).
func (s *Server) DoDB(db int, args ...string) (any, error) {
	conn, err := net.DialTimeout("tcp", s.Addr, 2*time.Second)
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	var buf []byte
	if db != 0 {
		buf = appendCommand(buf, "SELECT", strconv.Itoa(db))
	}
	buf = appendCommand(buf, args...)
	if _, err := conn.Write(buf); err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	r := bufio.NewReader(conn)
	if db != 0 {
		if _, err := readReply(r); err != nil {
			return nil, fmt.Errorf("redistest: SELECT %d: %w", db, err)
		}
	}
	v, err := readReply(r)
	if err != nil {
		var re ReplyError
		if errors.As(err, &re) {
			return nil, err
		}
		return nil, fmt.Errorf("redistest: %s: %w", args[0], err)
	}
	return v, nil
}

func appendCommand(buf []byte, args ...string) []byte {
	buf = append(buf, '*')
	buf = strconv.AppendInt(buf, int64(len(args)), 10)
	buf = append(buf, "\r\n"...)
	for _, a := range args {
		buf = append(buf, '$')
		buf = strconv.AppendInt(buf, int64(len(a)), 10)
		buf = append(buf, "\r\n"...)
		buf = append(buf, a...)
		buf = append(buf, "\r\n"...)
	}
	return buf
}

func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("malformed reply line %q", line)
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+':
		return body, nil
	case '-':
		return nil, ReplyError(body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, nil
		}
		b := make([]byte, n+2)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		return string(b[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, nil
		}
		out := make([]any, n)
		for i := range out {
			v, err := readReply(r)
			var re ReplyError
			if err != nil && !errors.As(err, &re) {
				return nil, err
			}
			if err != nil {
				v = re
			}
			out[i] = v
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown reply type %q", kind)
}

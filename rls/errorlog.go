package rls

import "log"

// ErrorLog returns a logger for the http.Server.ErrorLog of the server's
// listener named listener: net/http's lines (a failed TLS handshake, an
// accept error, a handler's panic) go through the server's bounded event
// log as the server's own failures do, one line an interval per listener
// whatever their rate.
func (s *Server) ErrorLog(listener string) *log.Logger { return s.events.ErrorLog(listener) }

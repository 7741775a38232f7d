package rls

import (
	"errors"
	"io"
	"log/slog"
	"net/http"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// maxJSONBody bounds a /json request body.
const maxJSONBody = 1 << 20

// Handler returns envoyproxy/ratelimit's HTTP endpoints:
//
//	POST /json      a RateLimitRequest in protojson; the RateLimitResponse in
//	                protojson, 200 when OK, 429 when OVER_LIMIT, 400 for a
//	                bad request, 500 when the store failed
//	/healthcheck    "OK" (200) while serving, 500 after Shutdown
//	/readyz         as /healthcheck, with a line on the store
//	                (Options.StoreStatus): "store redis://…: unavailable
//	                since … (…)" while the failure policy answers for Redis;
//	                still 200 then, since the server answers
//	/metrics        the Prometheus metrics of the server's registry
//	/status         who is being limited, by which rule (status.go); also
//	                /status.json, and the admin API under /admin/ (SetAdmin)
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /json", s.serveJSON)
	mux.HandleFunc("/healthcheck", s.serveHealth)
	mux.HandleFunc("GET /readyz", s.serveReady)
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg}))
	s.ops.register(mux) // /status, /status.json, /admin/ (status.go)
	return mux
}

// serving reports whether the health service says SERVING (false once
// Shutdown has begun the drain).
func (s *Server) serving(r *http.Request) bool {
	resp, err := s.health.Check(r.Context(), &healthpb.HealthCheckRequest{})
	return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
}

func (s *Server) serveHealth(w http.ResponseWriter, r *http.Request) {
	if !s.serving(r) {
		http.Error(w, "NOT SERVING", http.StatusInternalServerError)
		return
	}
	io.WriteString(w, "OK")
}

func (s *Server) serveReady(w http.ResponseWriter, r *http.Request) {
	if !s.serving(r) {
		http.Error(w, "not serving: draining, or no configuration loaded yet (--healthy-with-config)", http.StatusServiceUnavailable)
		return
	}
	io.WriteString(w, "ok\n")
	if s.storeStatus != nil {
		_, detail := s.storeStatus()
		io.WriteString(w, detail+"\n")
	}
}

func (s *Server) serveJSON(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSONBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, "rls: request body too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "rls: reading request: "+err.Error(), http.StatusBadRequest)
		return
	}
	var req pb.RateLimitRequest
	if err := protojson.Unmarshal(body, &req); err != nil {
		http.Error(w, "rls: bad request: "+err.Error(), http.StatusBadRequest)
		return
	}
	resp, err := s.ShouldRateLimit(s.tracer.ExtractHTTP(r.Context(), r.Header), &req)
	if err != nil {
		code := http.StatusInternalServerError
		if status.Code(err) == codes.InvalidArgument {
			code = http.StatusBadRequest
		}
		http.Error(w, status.Convert(err).Message(), code)
		return
	}
	out, err := protojson.Marshal(resp)
	if err != nil {
		s.log.Error("rls: encoding response", slog.Any("error", err))
		http.Error(w, "rls: encoding response", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT {
		w.WriteHeader(http.StatusTooManyRequests)
	}
	w.Write(out)
}

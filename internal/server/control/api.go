package control

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/server/eventlog"
	"github.com/sluicehq/sluice/ratelimit"
)

// TokenEnv is the environment variable that holds the admin token when no
// token file is configured.
const TokenEnv = "SLUICE_ADMIN_TOKEN"

// MaxOverrideTTL bounds an override's life: an override is a support
// action, not configuration.
const MaxOverrideTTL = 30 * 24 * time.Hour

// LoadToken returns the admin token: the first line of file when file is
// not "", else the value of $SLUICE_ADMIN_TOKEN ("" when neither: the API
// is then refused). A token shorter than 16 bytes is refused.
func LoadToken(file string) (string, error) {
	tok := os.Getenv(TokenEnv)
	src := "$" + TokenEnv
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("control: admin token: %w", err)
		}
		tok, _, _ = strings.Cut(string(b), "\n")
		src = file
	}
	tok = strings.TrimSpace(tok)
	if tok != "" && len(tok) < 16 {
		return "", fmt.Errorf("control: admin token in %s is %d bytes; want at least 16", src, len(tok))
	}
	return tok, nil
}

// Target is one rule's store key for an identity.
type Target struct {
	Rule  string `json:"rule"`
	Key   string `json:"key"`
	Quota bool   `json:"-"` // a calendar quota: no override
}

// API serves the admin endpoints. Its fields are read on each request.
type API struct {
	Control *Control
	// Token returns the bearer token; "" (or a nil Token) refuses every
	// call (403). It is read on each call, so it can follow reloads.
	Token func() string
	// Targets returns the store keys identity has on rule ("" every rule).
	// An identity that is a store key names itself.
	Targets func(ctx context.Context, identity, rule string) ([]Target, error)
	// Rules returns the IDs of the rules that rule names: a rule's ID, or
	// a name several rules may share; none when it names no rule that may
	// be changed. Enforcements are kept by ID.
	Rules func(rule string) []string
	// Resetter forgets a key (the store); nil refuses resets.
	Resetter ratelimit.Resetter
	Logger   *slog.Logger
	// Actions counts every call: sluice_admin_actions_total{action,result}
	// (NewActions).
	Actions *prometheus.CounterVec
	// Events, when not nil, takes the calls refused for their token
	// (eventlog.Unauthorized, rule "admin_token", the caller's address),
	// so a flood of bad tokens writes a bounded number of lines; nil logs
	// each one.
	Events *eventlog.Log
}

// NewActions registers and returns sluice_admin_actions_total.
func NewActions(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "sluice", Subsystem: "admin", Name: "actions_total",
		Help: "Admin API calls by action (reset, override_set, override_delete, enforce_set, enforce_delete, list) and result (ok, invalid, error, unauthorized, disabled).",
	}, []string{"action", "result"})
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	return c, nil
}

const maxBody = 64 << 10

// Register adds the admin endpoints to mux:
//
//	GET    /admin/state        overrides and enforcements in force
//	POST   /admin/reset        {"identity": "...", "rule": "..."}: forget the identity's state (on every rule when rule is "")
//	POST   /admin/override     {"identity", "rule", "rate", "period", "burst", "ttl"}: a limit for one identity until ttl passes
//	DELETE /admin/override     {"identity", "rule"}
//	POST   /admin/enforce      {"rule", "percent"}: enforce on percent % of identities, shadow for the rest
//	DELETE /admin/enforce      {"rule"}: back to the config
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /admin/state", a.guard("list", a.state))
	mux.HandleFunc("POST /admin/reset", a.guard("reset", a.reset))
	mux.HandleFunc("POST /admin/override", a.guard("override_set", a.setOverride))
	mux.HandleFunc("DELETE /admin/override", a.guard("override_delete", a.deleteOverride))
	mux.HandleFunc("POST /admin/enforce", a.guard("enforce_set", a.setEnforce))
	mux.HandleFunc("DELETE /admin/enforce", a.guard("enforce_delete", a.deleteEnforce))
}

// request is every endpoint's body.
type request struct {
	Identity string   `json:"identity"`
	Rule     string   `json:"rule"`
	Rate     *int64   `json:"rate"`
	Period   string   `json:"period"`
	Burst    int64    `json:"burst"`
	TTL      string   `json:"ttl"`
	Percent  *float64 `json:"percent"`
}

// apiError is an answer other than 200.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func invalid(format string, args ...any) error {
	return &apiError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

func (a *API) log() *slog.Logger {
	if a.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.Logger
}

func (a *API) count(action, result string) {
	if a.Actions != nil {
		a.Actions.WithLabelValues(action, result).Inc()
	}
}

// guard checks the token, reads the body and answers what h returns.
func (a *API) guard(action string, h func(ctx context.Context, req *request) (any, []any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token := ""
		if a.Token != nil {
			token = a.Token()
		}
		if token == "" {
			a.count(action, "disabled")
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "the admin API is disabled: configure a token (admin_token_file, --admin-token-file or $" + TokenEnv + ")"})
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			a.count(action, "unauthorized")
			if a.Events != nil {
				host, _, _ := net.SplitHostPort(r.RemoteAddr)
				a.Events.Report(eventlog.Unauthorized, "admin_token", host, nil)
			} else {
				a.log().Warn("admin: unauthorized call", "action", action, "remote", r.RemoteAddr)
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="sluice-admin"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "a valid bearer token is required"})
			return
		}
		var req request
		if r.Method != http.MethodGet {
			dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&req); err != nil && !errors.Is(err, io.EOF) {
				a.count(action, "invalid")
				writeJSON(w, http.StatusBadRequest, map[string]string{"error": "bad JSON body: " + err.Error()})
				return
			}
		}
		out, attrs, err := h(r.Context(), &req)
		if err != nil {
			var ae *apiError
			status, result := http.StatusInternalServerError, "error"
			if errors.As(err, &ae) {
				status, result = ae.status, "invalid"
			}
			a.count(action, result)
			a.log().Warn("admin: action failed", append([]any{"action", action, "remote", r.RemoteAddr, "err", err}, attrs...)...)
			writeJSON(w, status, map[string]string{"error": err.Error()})
			return
		}
		a.count(action, "ok")
		if action != "list" {
			a.log().Info("admin: "+action, append([]any{"remote", r.RemoteAddr}, attrs...)...)
		}
		writeJSON(w, http.StatusOK, out)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func (a *API) state(ctx context.Context, _ *request) (any, []any, error) {
	return map[string]any{"overrides": nonNil(a.Control.Overrides()), "enforce": nonNil(a.Control.Enforcements()), "shared": a.Control.Shared()}, nil, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// knownRule returns the IDs of the rules rule names.
func (a *API) knownRule(rule string) ([]string, error) {
	if rule == "" {
		return nil, invalid("rule is required")
	}
	var ids []string
	if a.Rules != nil {
		ids = a.Rules(rule)
	}
	if len(ids) == 0 {
		return nil, invalid("no rule named %q", rule)
	}
	return ids, nil
}

func (a *API) targets(ctx context.Context, req *request) ([]Target, error) {
	if req.Identity == "" {
		return nil, invalid("identity is required")
	}
	if len(req.Identity) > 1024 {
		return nil, invalid("identity is longer than 1024 bytes")
	}
	if req.Rule != "" {
		if _, err := a.knownRule(req.Rule); err != nil {
			return nil, err
		}
	}
	ts, err := a.Targets(ctx, req.Identity, req.Rule)
	if err != nil {
		return nil, invalid("%v", err)
	}
	if len(ts) == 0 {
		if req.Rule != "" {
			return nil, &apiError{http.StatusNotFound, fmt.Sprintf("rule %q does not apply to %q", req.Rule, req.Identity)}
		}
		return nil, &apiError{http.StatusNotFound, fmt.Sprintf("no rule applies to %q", req.Identity)}
	}
	return ts, nil
}

func (a *API) reset(ctx context.Context, req *request) (any, []any, error) {
	attrs := []any{"identity", req.Identity, "rule", req.Rule}
	if a.Resetter == nil {
		return nil, attrs, &apiError{http.StatusNotImplemented, "this store cannot reset keys"}
	}
	ts, err := a.targets(ctx, req)
	if err != nil {
		return nil, attrs, err
	}
	for _, t := range ts {
		if err := a.Resetter.Reset(ctx, t.Key); err != nil {
			return nil, attrs, fmt.Errorf("reset %s: %w", t.Key, err)
		}
	}
	return map[string]any{"reset": ts}, append(attrs, "keys", len(ts)), nil
}

func (a *API) setOverride(ctx context.Context, req *request) (any, []any, error) {
	attrs := []any{"identity", req.Identity, "rule", req.Rule}
	if req.Rule == "" {
		return nil, attrs, invalid("rule is required")
	}
	if req.Rate == nil {
		return nil, attrs, invalid("rate is required")
	}
	period, err := time.ParseDuration(req.Period)
	if err != nil {
		return nil, attrs, invalid("period: want a duration such as 1m, got %q", req.Period)
	}
	ttl, err := time.ParseDuration(req.TTL)
	if err != nil || ttl <= 0 || ttl > MaxOverrideTTL {
		return nil, attrs, invalid("ttl: want a duration from 1s to %v, such as 1h, got %q", MaxOverrideTTL, req.TTL)
	}
	lim := ratelimit.Limit{Rate: *req.Rate, Period: period, Burst: req.Burst}
	if err := lim.Validate(); err != nil {
		return nil, attrs, invalid("%v", err)
	}
	ts, err := a.targets(ctx, req)
	if err != nil {
		return nil, attrs, err
	}
	until := a.Control.opts.Now().Add(ttl).Truncate(time.Millisecond)
	var out []Override
	for _, t := range ts {
		if t.Quota {
			return nil, attrs, invalid("rule %q is a calendar quota: reset it instead", t.Rule)
		}
		o := Override{Rule: t.Rule, Who: Who(t.Key), Identity: req.Identity, Limit: lim, Until: until}
		if err := a.Control.SetOverride(ctx, o); err != nil {
			return nil, attrs, err
		}
		o.Rate, o.Period, o.Burst = lim.Rate, lim.Period.String(), lim.Burst
		out = append(out, o)
	}
	return map[string]any{"overrides": out}, append(attrs, "limit", lim.String(), "until", until), nil
}

func (a *API) deleteOverride(ctx context.Context, req *request) (any, []any, error) {
	attrs := []any{"identity", req.Identity, "rule", req.Rule}
	if req.Rule == "" {
		return nil, attrs, invalid("rule is required")
	}
	ts, err := a.targets(ctx, req)
	if err != nil {
		return nil, attrs, err
	}
	n := 0
	for _, t := range ts {
		had, err := a.Control.DeleteOverride(ctx, t.Rule, Who(t.Key))
		if err != nil {
			return nil, attrs, err
		}
		if had {
			n++
		}
	}
	return map[string]any{"deleted": n}, attrs, nil
}

func (a *API) setEnforce(ctx context.Context, req *request) (any, []any, error) {
	attrs := []any{"rule", req.Rule}
	ids, err := a.knownRule(req.Rule)
	if err != nil {
		return nil, attrs, err
	}
	if req.Percent == nil || !(*req.Percent >= 0 && *req.Percent <= 100) {
		return nil, attrs, invalid("percent: want a number from 0 to 100")
	}
	for _, id := range ids {
		if err := a.Control.SetEnforce(ctx, id, *req.Percent); err != nil {
			return nil, attrs, err
		}
	}
	return Enforcement{Rule: req.Rule, Percent: *req.Percent}, append(attrs, "ids", ids, "percent", *req.Percent), nil
}

func (a *API) deleteEnforce(ctx context.Context, req *request) (any, []any, error) {
	attrs := []any{"rule", req.Rule}
	ids, err := a.knownRule(req.Rule)
	if err != nil {
		return nil, attrs, err
	}
	for _, id := range ids {
		if err := a.Control.DeleteEnforce(ctx, id); err != nil {
			return nil, attrs, err
		}
	}
	return map[string]string{"rule": req.Rule, "enforce": "as configured"}, attrs, nil
}

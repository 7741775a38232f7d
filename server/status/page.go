package status

import (
	"context"
	_ "embed"
	"encoding/json"
	"html/template"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/server/topk"
)

// Page is everything /status shows, and /status.json serves.
type Page struct {
	Server    string       `json:"server"` // "gateway" or "rls"
	Generated time.Time    `json:"generated"`
	Store     StoreInfo    `json:"store"`
	Minutes   int          `json:"minutes"` // the length of each rule's minutes
	Rules     []RuleStatus `json:"rules"`
	Lookup    *Lookup      `json:"lookup,omitempty"`
	Refresh   int          `json:"refresh_seconds"`
	// Notes are one-line facts about the server's admin state (the
	// admin API's overrides), shown under the store.
	Notes []string `json:"notes,omitempty"`
}

// StoreInfo is the store's health and the failure policy.
type StoreInfo struct {
	URL           string `json:"url"`
	OK            bool   `json:"ok"`     // the store decides for itself
	Detail        string `json:"detail"` // "store redis://…: unavailable since …"
	FailurePolicy string `json:"failure_policy"`
}

// RuleStatus is one rule on the page.
type RuleStatus struct {
	RuleInfo
	// EnforcePercent is the share of identities the rule is enforced on
	// (the admin API's percentage enforcement); 100 without one, 0 for a
	// shadow rule.
	EnforcePercent float64 `json:"enforce_percent"`
	// Totals over Minutes.
	Allowed      uint64   `json:"allowed"`
	Denied       uint64   `json:"denied"`
	ShadowDenied uint64   `json:"shadow_denied"`
	StoreErrors  uint64   `json:"store_errors"`
	DenialRate   float64  `json:"denial_rate"` // denied / (allowed + denied), 0..1
	Minutes      []Minute `json:"minutes"`
	TopDenied    []Top    `json:"top_denied"`
	// TopShadowDenied is who the rule would have blocked: denials of a
	// shadow rule, or of the identities percentage enforcement spares.
	TopShadowDenied []Top `json:"top_shadow_denied"`
	Chart           Chart `json:"-"`
}

// Top is one key of a top-K summary.
type Top struct {
	Key   string    `json:"key"` // the store key
	Who   string    `json:"who"` // its descriptor entries (Label)
	Count uint64    `json:"count"`
	Err   uint64    `json:"error"` // the true count is in [count-error, count]
	First time.Time `json:"first_seen"`
	Last  time.Time `json:"last_seen"`
}

// Peek is one rule's state for one identity, read without charging.
type Peek struct {
	Rule       string  `json:"rule"` // the rule's ID (RuleID)
	Name       string  `json:"name"` // its name, as headers and metrics show it
	Key        string  `json:"key"`
	Limit      string  `json:"limit"`
	Quota      int64   `json:"quota"`
	Window     int64   `json:"window"`
	Remaining  int64   `json:"remaining"`
	ResetAfter float64 `json:"reset_after_seconds"`
	Shadow     bool    `json:"shadow"` // the rule would not deny this identity
	Override   string  `json:"override,omitempty"`
	Error      string  `json:"error,omitempty"`
}

// Lookup is the answer of the lookup box.
type Lookup struct {
	Identity string `json:"identity"`
	Error    string `json:"error,omitempty"`
	Peeks    []Peek `json:"rules"`
}

// Chart is a rule's denials per minute as SVG bars.
type Chart struct {
	Width, Height int
	Bars          []Bar
	Max           uint64
}

// Bar is one minute: the denied part and, above it, the shadow-denied.
type Bar struct {
	X, W           float64
	DY, DH, SY, SH float64
	Title          string
}

// Server serves a Recorder's page. Its fields are read on each request.
type Server struct {
	// Name is the server's kind on the page: "gateway" or "rls".
	Name     string
	Recorder *Recorder
	// Store reports the store's health; nil shows nothing.
	Store func() StoreInfo
	// Lookup peeks identity on every rule; nil hides the lookup box.
	Lookup func(ctx context.Context, identity string) ([]Peek, error)
	// Enforce returns a rule's enforcement percentage (EnforcePercent);
	// nil means 100, or 0 for a shadow rule.
	Enforce func(id string) float64
	// Notes returns the page's notes; nil, none.
	Notes func() []string
	// Refresh is the page's meta refresh; 0 means 5 s.
	Refresh time.Duration
	Logger  *slog.Logger
}

// maxIdentity bounds the lookup box's input.
const maxIdentity = 512

// Page builds the page; identity, when not "", is looked up.
func (s *Server) Page(ctx context.Context, identity string) *Page {
	now := s.Recorder.opts.Now()
	p := &Page{Server: s.Name, Generated: now.UTC(), Minutes: s.Recorder.opts.Minutes, Refresh: int(s.refresh() / time.Second)}
	if s.Store != nil {
		p.Store = s.Store()
	}
	if s.Notes != nil {
		p.Notes = s.Notes()
	}
	for _, rl := range s.Recorder.Rules() {
		rs := RuleStatus{RuleInfo: rl.Info(), Minutes: rl.lastMinutes(now)}
		rs.EnforcePercent = 100
		if rs.Shadow {
			rs.EnforcePercent = 0
		}
		if s.Enforce != nil {
			rs.EnforcePercent = s.Enforce(rs.ID)
		}
		for _, m := range rs.Minutes {
			rs.Allowed += m.Allowed
			rs.Denied += m.Denied
			rs.ShadowDenied += m.ShadowDenied
			rs.StoreErrors += m.StoreErrors
		}
		if n := rs.Allowed + rs.Denied; n > 0 {
			rs.DenialRate = float64(rs.Denied) / float64(n)
		}
		rs.TopDenied = tops(rl.denied.Top(s.Recorder.opts.Top))
		rs.TopShadowDenied = tops(rl.shadow.Top(s.Recorder.opts.Top))
		rs.Chart = chart(rs.Minutes)
		p.Rules = append(p.Rules, rs)
	}
	if identity != "" {
		if len(identity) > maxIdentity {
			identity = identity[:maxIdentity]
		}
		l := &Lookup{Identity: identity}
		if s.Lookup == nil {
			l.Error = "this server has no lookup"
		} else if peeks, err := s.Lookup(ctx, identity); err != nil {
			l.Error = err.Error()
		} else {
			l.Peeks = peeks
		}
		p.Lookup = l
	}
	return p
}

func (s *Server) refresh() time.Duration {
	if s.Refresh > 0 {
		return s.Refresh
	}
	return 5 * time.Second
}

func tops(es []topk.Entry) []Top {
	out := make([]Top, 0, len(es))
	for _, e := range es {
		out = append(out, Top{Key: e.Key, Who: Label(e.Key), Count: e.Count, Err: e.Err, First: e.First.UTC(), Last: e.Last.UTC()})
	}
	return out
}

func chart(ms []Minute) Chart {
	c := Chart{Width: 300, Height: 60}
	for _, m := range ms {
		c.Max = max(c.Max, m.Denied+m.ShadowDenied)
	}
	if len(ms) == 0 {
		return c
	}
	w := float64(c.Width) / float64(len(ms))
	h := float64(c.Height)
	for i, m := range ms {
		b := Bar{X: float64(i) * w, W: w - 1, Title: m.Start.Format("15:04") + " UTC: " +
			strconv.FormatUint(m.Denied, 10) + " denied, " + strconv.FormatUint(m.ShadowDenied, 10) + " shadow-denied"}
		if c.Max > 0 {
			b.DH = h * float64(m.Denied) / float64(c.Max)
			b.SH = h * float64(m.ShadowDenied) / float64(c.Max)
		}
		b.DY = h - b.DH
		b.SY = b.DY - b.SH
		c.Bars = append(c.Bars, b)
	}
	return c
}

//go:embed status.html.tmpl
var pageHTML string

var pageTmpl = template.Must(template.New("status").Funcs(template.FuncMap{
	"pct": func(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" },
	"num": func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	"ago": func(now, t time.Time) string {
		d := now.Sub(t).Round(time.Second)
		if d < 0 {
			d = 0
		}
		return d.String()
	},
	"inc": func(i int) int { return i + 1 },
}).Parse(pageHTML))

// Register adds GET /status and GET /status.json to mux. Both take
// ?identity= for the lookup.
func (s *Server) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /status", s.serveHTML)
	mux.HandleFunc("GET /status.json", s.serveJSON)
}

func (s *Server) serveHTML(w http.ResponseWriter, r *http.Request) {
	p := s.Page(r.Context(), strings.TrimSpace(r.URL.Query().Get("identity")))
	var b strings.Builder
	if err := pageTmpl.Execute(&b, p); err != nil {
		if s.Logger != nil {
			s.Logger.Error("status: render", "err", err)
		}
		http.Error(w, "status: cannot render the page", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	w.Write([]byte(b.String()))
}

func (s *Server) serveJSON(w http.ResponseWriter, r *http.Request) {
	p := s.Page(r.Context(), strings.TrimSpace(r.URL.Query().Get("identity")))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(p)
}

package httplimit

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Problem is the application/problem+json body (RFC 9457) of the
// middleware's error responses. Policy names the violated rate limit
// policy on 429 (except in Opaque mode).
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Policy string `json:"policy,omitempty"`
}

func writeProblem(w http.ResponseWriter, status int, detail, policy string) {
	WriteProblem(w, Problem{Status: status, Detail: detail, Policy: policy})
}

// WriteProblem writes p as an application/problem+json response with
// status p.Status. An empty Type is "about:blank" and an empty Title the
// status text.
func WriteProblem(w http.ResponseWriter, p Problem) {
	status := p.Status
	if p.Type == "" {
		p.Type = "about:blank"
	}
	if p.Title == "" {
		p.Title = http.StatusText(status)
	}
	b, err := json.Marshal(p)
	if err != nil {
		b = []byte(`{"type":"about:blank","status":` + strconv.Itoa(status) + `}`)
	}
	b = append(b, '\n')
	h := w.Header()
	h["Content-Type"] = []string{"application/problem+json"}
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	w.WriteHeader(status)
	w.Write(b)
}

package gateway

import (
	"encoding/json"
	"net/http"
)

// echo is the builtin:echo upstream: it answers every request with a small
// JSON description of it, so the gateway can be tried with nothing else
// running.
func echo(w http.ResponseWriter, r *http.Request) {
	b, _ := json.Marshal(struct {
		OK     bool   `json:"ok"`
		Method string `json:"method"`
		Path   string `json:"path"`
	}{true, r.Method, r.URL.Path})
	b = append(b, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

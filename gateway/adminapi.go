package gateway

import (
	"net/http"
)

// registerAdmin adds the status page and the admin API to the admin mux:
//
//	GET /status, /status.json   who is being limited (server/status)
//	/admin/...                  reset, override, enforce (internal/server/control),
//	                            behind admin_token_file's bearer token
//	                            ($SLUICE_ADMIN_TOKEN); refused (403) without one
func (o *ops) registerAdmin(mux *http.ServeMux) {
	o.page.Register(mux)
	o.api.Register(mux)
}

// adminToken is the admin API's token of the config being served.
func (o *ops) adminToken() string {
	if p := o.token.Load(); p != nil {
		return *p
	}
	return ""
}

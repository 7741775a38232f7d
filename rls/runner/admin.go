package runner

import (
	"fmt"

	"github.com/sluicehq/sluice/internal/server/control"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/rls"
	"github.com/sluicehq/sluice/storeurl"
)

// setRLSAdmin names the failure policy on the status page and turns on
// sluice rls's admin API (--admin-token-file, else
// $SLUICE_ADMIN_TOKEN): resets through the store, overrides and
// percentages shared through Redis when the store is Redis.
func setRLSAdmin(srv *rls.Server, store *storeurl.Store, tokenFile string, onError ratelimit.FailurePolicy) error {
	srv.SetFailurePolicy(onError)
	tok, err := control.LoadToken(tokenFile)
	if err != nil {
		return fmt.Errorf("%w: --admin-token-file: %v", ErrUsage, err)
	}
	actions, err := control.NewActions(srv.Registry())
	if err != nil {
		return err
	}
	if r := store.Redis; r != nil {
		srv.SetAdmin(tok, r, r, actions)
	} else {
		srv.SetAdmin(tok, store.Memory, nil, actions)
	}
	return nil
}

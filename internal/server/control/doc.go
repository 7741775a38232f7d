// Package control is what an operator can change on a running server
// without editing a file: forget one identity's state (reset), give one
// identity another limit for a while (override), and enforce a rule on a
// share of identities only, shadowing it for the rest (percentage
// enforcement, as Envoy's filter_enforced rolls out a rate limit filter).
//
// A Control holds the overrides and percentages. With Options.Settings
// (a Redis store's settings table) they are shared by every process on
// that Redis: a change is written there, and each process polls the
// table's version (one GET per Options.Poll) and reloads it when it moved,
// so the fleet converges within one poll. Without, they live in the
// process. Overrides expire at their Until; an expired one is ignored at
// once and deleted at the next load.
//
// Identities are named by their store keys' descriptor part: what follows
// the third ':' of a sluice key ("<domain>_<key>_<value>_…", see
// rules.Rule.AppendKey), which is the same for every algorithm, period and
// quota period of a rule. Adjust, the hot path, is one atomic load when
// nothing is set, and two map lookups otherwise; it does not allocate.
//
// API serves the admin endpoints behind a bearer token: refused (403)
// without a configured token, 401 with a wrong or missing one. Every
// action is logged and counted in sluice_admin_actions_total{action,result}.
package control

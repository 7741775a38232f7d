// Package status is what both servers show an operator on their admin
// listener: who is being limited right now, by which rule.
//
// A Recorder keeps, per rule, a ring of per-minute counters of decisions
// (allowed, denied, shadow-denied, store errors; Options.Minutes of them)
// and two Space-Saving top-K summaries (internal/server/topk) of the keys
// denied and of those shadow-denied (the "would have blocked" of a dark
// launch). Its memory is fixed per rule, whatever the traffic: the rules
// of the config times (Minutes counters + 2 top-K summaries).
//
// Rule.Record is the hot path: an atomic add, and for a denial a top-K
// record (a shard lock, no allocation for a key already tracked).
//
// Handler serves a Page as /status (server-rendered html/template, no
// script, a meta refresh; a small inline SVG of denials per minute) and
// as /status.json. The page's lookup box peeks (never charges) one
// identity on every rule through the server's Source.
//
// A Door is what both servers hand the page and the admin API
// (internal/server/control): the lookup, the admin API's targets and rule
// IDs, the enforcement percentages, and the admin API's adjustments of a
// check, written once over rules.Check; a server gives it only how an
// identity becomes checks and how its store peeks. A rule's ID (RuleID)
// is its descriptor path, the same through either server.
package status

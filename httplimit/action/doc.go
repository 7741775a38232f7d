// Package action is the vocabulary that turns an HTTP request into rate
// limit descriptors: Envoy's rate_limits actions (remote_address,
// masked_remote_address, request_headers, query_parameters, generic_key,
// header_value_match, query_parameter_value_match) and sluice's own
// (identity, tier, method, path, cookie). Each [Action] makes one entry of
// a descriptor from a request and its caller; a [Descriptor] is an ordered
// list of them, matched as one descriptor against the rules
// (rules.Set.Resolve).
//
// httplimit.Middleware builds each request's descriptors with them, and
// the gateway's config decoder builds them from a rate_limits section:
//
//	ds := []action.Descriptor{{Actions: []action.Action{action.GenericKey{DescriptorValue: "api"}, action.IdentityKey{}}}}
//
// [Check] reports what makes an action useless or surprising (a header
// name that is not a token, an empty matcher), with Envoy's field names,
// for a config loader to print with its file and line.
package action

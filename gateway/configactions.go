package gateway

import (
	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice/httplimit/action"
	"github.com/sluicehq/sluice/internal/config/yamlnode"
)

// actionKeys are the rate_limits actions the gateway decodes: Envoy's
// (remote_address, masked_remote_address, request_headers,
// query_parameters, generic_key, header_value_match,
// query_parameter_value_match) and sluice's (identity, tier, method, path
// and cookie), one small decoder each, given the action's value and its
// path. A decoder that already reported a problem returns nil, so that
// CheckAction does not report it again. Envoy's destination_cluster and
// source_cluster are refused with the reason (see noClusterNames).
var actionKeys = map[string]func(d *decoder, v *yaml.Node, p string) action.Action{
	"remote_address": func(d *decoder, v *yaml.Node, p string) action.Action {
		d.fields(v, p, nil)
		return action.RemoteAddress{}
	},
	"request_headers":       (*decoder).requestHeaders,
	"generic_key":           (*decoder).genericKey,
	"header_value_match":    (*decoder).headerValueMatch,
	"masked_remote_address": (*decoder).maskedRemoteAddress,
	"query_parameters": keyed("query_parameter_name", func(x *action.QueryParameters) (*string, *string, *bool) {
		return &x.QueryParameterName, &x.DescriptorKey, &x.SkipIfAbsent
	}),
	"query_parameter_value_match": (*decoder).queryParameterValueMatch,
	"cookie": keyed("cookie_name", func(x *action.Cookie) (*string, *string, *bool) {
		return &x.CookieName, &x.DescriptorKey, &x.SkipIfAbsent
	}),
	"destination_cluster": func(d *decoder, v *yaml.Node, p string) action.Action {
		d.noClusterNames(v, p, "route")
		return nil
	},
	"source_cluster": func(d *decoder, v *yaml.Node, p string) action.Action {
		d.noClusterNames(v, p, "caller")
		return nil
	},
	"identity": strFields(func(x *action.IdentityKey) map[string]*string {
		return map[string]*string{"user_key": &x.UserKey, "ip_key": &x.IPKey}
	}),
	"tier": strFields(func(x *action.Tier) map[string]*string {
		return map[string]*string{"descriptor_key": &x.DescriptorKey, "default": &x.Default}
	}),
	"method": strFields(func(x *action.Method) map[string]*string {
		return map[string]*string{"descriptor_key": &x.DescriptorKey}
	}),
	"path": strFields(func(x *action.Path) map[string]*string { return map[string]*string{"descriptor_key": &x.DescriptorKey} }),
}

// action decodes one rate_limits action: a mapping with exactly one of
// actionKeys.
func (d *decoder) action(n *yaml.Node, path string) action.Action {
	if n.Kind != yaml.MappingNode || len(n.Content) != 2 {
		d.add(n.Line, path, "want a mapping with exactly one action (remote_address, masked_remote_address, request_headers, query_parameters, generic_key, header_value_match, query_parameter_value_match, identity, tier, method, path or cookie), got %s", yamlnode.Kind(n))
		return nil
	}
	var a action.Action
	handlers := make(map[string]func(k, v *yaml.Node), len(actionKeys))
	for key, decode := range actionKeys {
		handlers[key] = func(_, v *yaml.Node) { a = decode(d, v, yamlnode.Join(path, key)) }
	}
	d.fields(n, path, handlers)
	return a
}

// strFields decodes an action of type A whose fields are all optional
// strings: fields maps each field's name to where it goes in x.
func strFields[A action.Action](fields func(x *A) map[string]*string) func(d *decoder, v *yaml.Node, p string) action.Action {
	return func(d *decoder, v *yaml.Node, p string) action.Action {
		var x A
		dsts := fields(&x)
		handlers := make(map[string]func(k, v *yaml.Node), len(dsts))
		for name, dst := range dsts {
			handlers[name] = d.strTo(dst, p, name)
		}
		d.fields(v, p, handlers)
		return x
	}
}

// strTo decodes a string field of the mapping at p into dst.
func (d *decoder) strTo(dst *string, p, field string) func(k, v *yaml.Node) {
	return func(_, v *yaml.Node) { *dst = d.str(v, yamlnode.Join(p, field)) }
}

// boolTo decodes a boolean field of the mapping at p into dst.
func (d *decoder) boolTo(dst *bool, p, field string) func(k, v *yaml.Node) {
	return func(_, v *yaml.Node) { *dst = d.boolean(v, yamlnode.Join(p, field)) }
}

func (d *decoder) requestHeaders(v *yaml.Node, p string) action.Action {
	var x action.RequestHeaders
	// Returned even when refused: CheckAction checks the header name too.
	d.keyedSource(v, p, "header_name", &x.HeaderName, &x.DescriptorKey, &x.SkipIfAbsent)
	return x
}

// keyedSource decodes what request_headers, query_parameters and cookie
// share: the name of what is read (under nameField), descriptor_key and
// skip_if_absent. It reports false, after saying so, when the name or the
// key is missing.
func (d *decoder) keyedSource(v *yaml.Node, p, nameField string, name, key *string, skip *bool) bool {
	d.fields(v, p, map[string]func(k, v *yaml.Node){
		nameField:        d.strTo(name, p, nameField),
		"descriptor_key": d.strTo(key, p, "descriptor_key"),
		"skip_if_absent": d.boolTo(skip, p, "skip_if_absent"),
	})
	if *name == "" || *key == "" {
		d.add(v.Line, p, "%s and descriptor_key are required", nameField)
		return false
	}
	return true
}

// keyed decodes an action that reads one named part of the request
// (query_parameters, cookie) with keyedSource, into the fields of x that
// at gives; nil when the name or the key is missing (reported here, not
// again by CheckAction).
func keyed[A action.Action](nameField string, at func(x *A) (name, key *string, skip *bool)) func(d *decoder, v *yaml.Node, p string) action.Action {
	return func(d *decoder, v *yaml.Node, p string) action.Action {
		var x A
		name, key, skip := at(&x)
		if !d.keyedSource(v, p, nameField, name, key, skip) {
			return nil
		}
		return x
	}
}

func (d *decoder) genericKey(v *yaml.Node, p string) action.Action {
	var x action.GenericKey
	d.fields(v, p, map[string]func(k, v *yaml.Node){
		"descriptor_value": d.strTo(&x.DescriptorValue, p, "descriptor_value"),
		"descriptor_key":   d.strTo(&x.DescriptorKey, p, "descriptor_key"),
	})
	if x.DescriptorValue == "" {
		d.add(v.Line, p, "descriptor_value is required")
	}
	return x
}

func (d *decoder) headerValueMatch(v *yaml.Node, p string) action.Action {
	var x action.HeaderValueMatch
	d.valueMatch(v, p, &x.DescriptorValue, &x.DescriptorKey, &x.DontExpectMatch, "headers", "header matcher",
		func(v *yaml.Node, p string) { x.Headers = append(x.Headers, d.headerMatcher(v, p)) })
	return x
}

// valueMatch decodes what header_value_match and query_parameter_value_match
// share: descriptor_value (required), descriptor_key, expect_match, and the
// list under listKey (at least one), each of whose items add decodes.
func (d *decoder) valueMatch(v *yaml.Node, p string, value, key *string, dontExpect *bool, listKey, what string, add func(v *yaml.Node, p string)) {
	n := 0
	d.fields(v, p, map[string]func(k, v *yaml.Node){
		"descriptor_value": d.strTo(value, p, "descriptor_value"),
		"descriptor_key":   d.strTo(key, p, "descriptor_key"),
		"expect_match":     func(k, v *yaml.Node) { *dontExpect = !d.boolean(v, yamlnode.Join(p, "expect_match")) },
		listKey: func(k, v *yaml.Node) {
			d.list(v, yamlnode.Join(p, listKey), func(_ int, v *yaml.Node, p string) { n++; add(v, p) })
		},
	})
	if *value == "" {
		d.add(v.Line, p, "descriptor_value is required")
	}
	if n == 0 {
		d.add(v.Line, yamlnode.Join(p, listKey), "want at least one %s", what)
	}
}

func (d *decoder) maskedRemoteAddress(v *yaml.Node, p string) action.Action {
	var x action.MaskedRemoteAddress
	mask := func(field string, bits int64, dst *int) func(k, v *yaml.Node) {
		return func(k, v *yaml.Node) {
			fp := yamlnode.Join(p, field)
			// v is dereferenced already (the walker follows aliases).
			if v.Kind == yaml.ScalarNode && v.Value == "0" {
				d.add(v.Line, fp, "a 0-bit mask puts every client in one key: use generic_key for one shared counter, or leave %s out for the whole address (/%d)", field, bits)
				return
			}
			*dst = int(d.integer(v, fp, 1, bits))
		}
	}
	d.fields(v, p, map[string]func(k, v *yaml.Node){
		"v4_prefix_mask_len": mask("v4_prefix_mask_len", 32, &x.V4PrefixMaskLen),
		"v6_prefix_mask_len": mask("v6_prefix_mask_len", 128, &x.V6PrefixMaskLen),
	})
	return x
}

func (d *decoder) queryParameterValueMatch(v *yaml.Node, p string) action.Action {
	var x action.QueryParameterValueMatch
	before := len(d.errs)
	d.valueMatch(v, p, &x.DescriptorValue, &x.DescriptorKey, &x.DontExpectMatch, "query_parameters", "query parameter matcher",
		func(v *yaml.Node, p string) { x.QueryParameters = append(x.QueryParameters, d.queryMatcher(v, p)) })
	if len(d.errs) != before {
		return nil // reported here, not again by CheckAction
	}
	return x
}

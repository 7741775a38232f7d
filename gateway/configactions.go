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
	"request_headers":             (*decoder).requestHeaders,
	"generic_key":                 (*decoder).genericKey,
	"header_value_match":          (*decoder).headerValueMatch,
	"masked_remote_address":       (*decoder).maskedRemoteAddress,
	"query_parameters":            (*decoder).queryParameters,
	"query_parameter_value_match": (*decoder).queryParameterValueMatch,
	"cookie":                      (*decoder).cookie,
	"destination_cluster": func(d *decoder, v *yaml.Node, p string) action.Action {
		d.noClusterNames(v, p, "route")
		return nil
	},
	"source_cluster": func(d *decoder, v *yaml.Node, p string) action.Action {
		d.noClusterNames(v, p, "caller")
		return nil
	},
	"identity": func(d *decoder, v *yaml.Node, p string) action.Action {
		var x action.IdentityKey
		d.fields(v, p, map[string]func(k, v *yaml.Node){
			"user_key": d.strTo(&x.UserKey, p, "user_key"),
			"ip_key":   d.strTo(&x.IPKey, p, "ip_key"),
		})
		return x
	},
	"tier": func(d *decoder, v *yaml.Node, p string) action.Action {
		var x action.Tier
		d.fields(v, p, map[string]func(k, v *yaml.Node){
			"descriptor_key": d.strTo(&x.DescriptorKey, p, "descriptor_key"),
			"default":        d.strTo(&x.Default, p, "default"),
		})
		return x
	},
	"method": func(d *decoder, v *yaml.Node, p string) action.Action {
		var x action.Method
		d.fields(v, p, map[string]func(k, v *yaml.Node){"descriptor_key": d.strTo(&x.DescriptorKey, p, "descriptor_key")})
		return x
	},
	"path": func(d *decoder, v *yaml.Node, p string) action.Action {
		var x action.Path
		d.fields(v, p, map[string]func(k, v *yaml.Node){"descriptor_key": d.strTo(&x.DescriptorKey, p, "descriptor_key")})
		return x
	},
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
	d.fields(v, p, map[string]func(k, v *yaml.Node){
		"header_name":    d.strTo(&x.HeaderName, p, "header_name"),
		"descriptor_key": d.strTo(&x.DescriptorKey, p, "descriptor_key"),
		"skip_if_absent": d.boolTo(&x.SkipIfAbsent, p, "skip_if_absent"),
	})
	if x.HeaderName == "" || x.DescriptorKey == "" {
		d.add(v.Line, p, "header_name and descriptor_key are required")
	}
	return x
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
	d.fields(v, p, map[string]func(k, v *yaml.Node){
		"descriptor_value": d.strTo(&x.DescriptorValue, p, "descriptor_value"),
		"descriptor_key":   d.strTo(&x.DescriptorKey, p, "descriptor_key"),
		"expect_match":     func(k, v *yaml.Node) { x.DontExpectMatch = !d.boolean(v, yamlnode.Join(p, "expect_match")) },
		"headers": func(k, v *yaml.Node) {
			d.list(v, yamlnode.Join(p, "headers"), func(_ int, v *yaml.Node, p string) {
				x.Headers = append(x.Headers, d.headerMatcher(v, p))
			})
		},
	})
	if x.DescriptorValue == "" {
		d.add(v.Line, p, "descriptor_value is required")
	}
	if len(x.Headers) == 0 {
		d.add(v.Line, yamlnode.Join(p, "headers"), "want at least one header matcher")
	}
	return x
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

func (d *decoder) queryParameters(v *yaml.Node, p string) action.Action {
	var x action.QueryParameters
	d.fields(v, p, map[string]func(k, v *yaml.Node){
		"query_parameter_name": d.strTo(&x.QueryParameterName, p, "query_parameter_name"),
		"descriptor_key":       d.strTo(&x.DescriptorKey, p, "descriptor_key"),
		"skip_if_absent":       d.boolTo(&x.SkipIfAbsent, p, "skip_if_absent"),
	})
	if x.QueryParameterName == "" || x.DescriptorKey == "" {
		d.add(v.Line, p, "query_parameter_name and descriptor_key are required")
		return nil // reported here, not again by CheckAction
	}
	return x
}

func (d *decoder) queryParameterValueMatch(v *yaml.Node, p string) action.Action {
	var x action.QueryParameterValueMatch
	before := len(d.errs)
	d.fields(v, p, map[string]func(k, v *yaml.Node){
		"descriptor_value": d.strTo(&x.DescriptorValue, p, "descriptor_value"),
		"descriptor_key":   d.strTo(&x.DescriptorKey, p, "descriptor_key"),
		"expect_match":     func(k, v *yaml.Node) { x.DontExpectMatch = !d.boolean(v, yamlnode.Join(p, "expect_match")) },
		"query_parameters": func(k, v *yaml.Node) {
			d.list(v, yamlnode.Join(p, "query_parameters"), func(_ int, v *yaml.Node, p string) {
				x.QueryParameters = append(x.QueryParameters, d.queryMatcher(v, p))
			})
		},
	})
	if x.DescriptorValue == "" {
		d.add(v.Line, p, "descriptor_value is required")
	}
	if len(x.QueryParameters) == 0 {
		d.add(v.Line, yamlnode.Join(p, "query_parameters"), "want at least one query parameter matcher")
	}
	if len(d.errs) != before {
		return nil // reported here, not again by CheckAction
	}
	return x
}

func (d *decoder) cookie(v *yaml.Node, p string) action.Action {
	var x action.Cookie
	d.fields(v, p, map[string]func(k, v *yaml.Node){
		"cookie_name":    d.strTo(&x.CookieName, p, "cookie_name"),
		"descriptor_key": d.strTo(&x.DescriptorKey, p, "descriptor_key"),
		"skip_if_absent": d.boolTo(&x.SkipIfAbsent, p, "skip_if_absent"),
	})
	if x.CookieName == "" || x.DescriptorKey == "" {
		d.add(v.Line, p, "cookie_name and descriptor_key are required")
		return nil // reported here, not again by CheckAction
	}
	return x
}

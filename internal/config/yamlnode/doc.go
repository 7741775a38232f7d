// Package yamlnode is the one YAML walker behind sluice's config formats:
// the rules files of package rules (envoyproxy/ratelimit's format) and the
// gateway's config. Both decode with yaml.v3 into a node tree and read it
// with a [Walker], so that both have the same limits and say the same
// thing about the same mistake:
//
//   - every problem is reported, as "want …, got …" with the line and the
//     path of the field, up to [MaxProblems] per file, then one
//     "too many problems: stopped after 100";
//   - a walk visits at most [MaxNodes] nodes, aliases expanded, then
//     reports "file too large" once (an alias bomb costs the same bounded
//     time as a large file);
//   - an unknown field gets the closest known name ("did you mean") or the
//     list of known fields; a field given twice names the line of the
//     first; a key that is a mapping or a list is refused;
//   - merge keys ("<<: *defaults") are expanded as yaml.v3 expands them
//     into a struct: the mapping's own keys win;
//   - null is an empty string, false, an empty list or an absent mapping;
//     booleans include YAML 1.1's unquoted yes/no/on/off, as yaml.v2 (and
//     envoyproxy/ratelimit) read them.
//
// What differs between the formats (envoyproxy/ratelimit's units and
// descriptors, the gateway's routes and URLs) stays in the decoders.
//
// [Kind], [Join] and [ErrorLine] name a node, a field's path and the line
// of a yaml.v3 syntax error for the messages.
package yamlnode

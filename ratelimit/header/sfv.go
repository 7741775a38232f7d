package header

// AppendString appends s as a structured field string (RFC 9651), as a
// policy name is written in RateLimit and RateLimit-Policy: quoted, with '"'
// and '\' escaped and bytes outside printable ASCII (which a string may not
// hold) replaced by '?'.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c > 0x7e:
			b = append(b, '?')
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

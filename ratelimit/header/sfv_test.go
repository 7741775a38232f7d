package header

import "testing"

func TestAppendString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"per-user", `"per-user"`},
		{`a"b\c`, `"a\"b\\c"`},
		{"tab\there", `"tab?here"`},
		{"ünï", `"??n??"`},
		{"", `""`},
	} {
		if got := string(AppendString(nil, tc.in)); got != tc.want {
			t.Errorf("AppendString(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

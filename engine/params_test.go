package engine

import (
	"strings"
	"testing"
)

// TestCheckParamsRefusesWhatCannotReachACommand: a param's name is
// letters, digits, _ and - (what the message says), and a value with a
// NUL byte, which no environment variable or argument can carry, is
// refused when the trigger is asked, naming the param.
func TestCheckParamsRefusesWhatCannotReachACommand(t *testing.T) {
	for _, c := range []struct {
		params map[string]string
		want   string // in the error; "" for none
	}{
		{map[string]string{"region": "cn", "run-id_2": "x"}, ""},
		{map[string]string{"x\x1b": "v"}, `param name "x\x1b"`},
		{map[string]string{"a\nb": "v"}, `param name "a\nb"`},
		{map[string]string{"bell\a": "v"}, "use letters, digits, _ and -"},
		{map[string]string{"x/y": "v"}, `param name "x/y"`},
		{map[string]string{"é": "v"}, `param name "é"`},
		{map[string]string{"a b": "v"}, `param name "a b"`},
		{map[string]string{"": "v"}, `param name ""`},
		{map[string]string{"k": "a\x00b"}, `param "k": its value has a NUL byte`},
	} {
		err := CheckParams(c.params)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("CheckParams(%q) = %v, want nil", c.params, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("CheckParams(%q) = %v, want an error with %q", c.params, err, c.want)
		}
	}
}

// A param's value is bounded in bytes, as documented: 4,096 bytes of
// two-byte characters are 2,048 characters.
func TestCheckParamsCountsBytes(t *testing.T) {
	if err := CheckParams(map[string]string{"k": strings.Repeat("é", 2048)}); err != nil {
		t.Errorf("4096 bytes: %v, want accepted", err)
	}
	err := CheckParams(map[string]string{"k": strings.Repeat("é", 2049)})
	const want = `param "k" is 4098 bytes long; give at most 4096 bytes`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("4098 bytes (2049 characters): %v, want %q", err, want)
	}
}

package cli

import "testing"

// An attempt's outputs print sorted by key; a value that could drive the
// terminal or be misread (a newline, an escape, a space, empty) is quoted.
func TestOutputsText(t *testing.T) {
	t.Parallel()
	got := OutputsText(map[string]string{"rows": "12", "note": "a b", "esc": "\x1b[31mred", "nl": "x\ny", "empty": "", "path": "s3://b/k=v"})
	want := `empty="" esc="\x1b[31mred" nl="x\ny" note="a b" path=s3://b/k=v rows=12`
	if got != want {
		t.Errorf("OutputsText:\n got %s\nwant %s", got, want)
	}
}

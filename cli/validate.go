package cli

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/ax-sched/ax/defs"
)

func WriteValidateText(out, errOut io.Writer, files []string, errs defs.Errors) error {
	for _, e := range errs {
		if _, err := fmt.Fprintln(out, e.Error()); err != nil {
			return err
		}
	}
	nerr, nwarn := len(errs.Fatal()), len(errs.Warnings())
	if nerr == 0 {
		_, err := fmt.Fprintf(errOut, "ok: %d file(s) valid, %d warning(s)\n", len(files), nwarn)
		return err
	}
	_, err := fmt.Fprintf(errOut, "invalid: %d error(s), %d warning(s) in %d file(s)\n", nerr, nwarn, len(files))
	return err
}

// ValidateReport is the --format json output of ax validate.
type ValidateReport struct {
	Valid    bool          `json:"valid"`
	Files    []string      `json:"files"`
	Errors   []*defs.Error `json:"errors"`
	Warnings []*defs.Error `json:"warnings"`
}

func WriteValidateJSON(out io.Writer, files []string, errs defs.Errors) error {
	r := ValidateReport{
		Valid:    len(errs.Fatal()) == 0,
		Files:    files,
		Errors:   nonNil(errs.Fatal()),
		Warnings: nonNil(errs.Warnings()),
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func nonNil(es defs.Errors) []*defs.Error {
	if es == nil {
		return []*defs.Error{}
	}
	return es
}

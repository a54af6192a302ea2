package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/ax-sched/ax/defs"
)

// WriteValidateText prints every problem to out and a summary to errOut:
// when the files are valid, with the zone each pipeline schedules in.
func WriteValidateText(out, errOut io.Writer, files []string, errs defs.Errors, pls []*defs.Pipeline) error {
	for _, e := range errs {
		if _, err := fmt.Fprintln(out, e.Error()); err != nil {
			return err
		}
	}
	nerr, nwarn := len(errs.Fatal()), len(errs.Warnings())
	if nerr == 0 {
		_, err := fmt.Fprintf(errOut, "ok: %d file(s) valid, %d warning(s)\n", len(files), nwarn)
		if err == nil && len(pls) > 0 {
			_, err = fmt.Fprintf(errOut, "zones: %s\n", ZonesLine(pls))
		}
		return err
	}
	_, err := fmt.Fprintf(errOut, "invalid: %d error(s), %d warning(s) in %d file(s)\n", nerr, nwarn, len(files))
	return err
}

// ZonesLine names the zone each pipeline schedules in, grouped by zone
// ("Asia/Shanghai (billing_daily*, orders_daily), UTC (events_hourly)"),
// marking with * those whose file names none and says what that means.
func ZonesLine(pls []*defs.Pipeline) string {
	byZone := map[string][]string{}
	defaulted := false
	for _, p := range pls {
		name := p.Name
		if p.ZoneDefault {
			name += "*"
			defaulted = true
		}
		byZone[p.Timezone] = append(byZone[p.Timezone], name)
	}
	var parts []string
	for _, z := range slices.Sorted(maps.Keys(byZone)) {
		names := byZone[z]
		slices.Sort(names)
		if len(names) > 5 {
			names = append(names[:5:5], fmt.Sprintf("%d more", len(names)-5))
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", z, strings.Join(names, ", ")))
	}
	line := strings.Join(parts, ", ")
	if defaulted {
		line += fmt.Sprintf("; * names no timezone: %s is the default (write timezone: in the file to change it)", defs.DefaultTimezone)
	}
	return line
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

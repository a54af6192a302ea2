package api

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
)

// Page tokens: an answer that has more gives next_page, and the client
// passes it back unchanged as page= to read on. A token is opaque to
// clients; inside it names the query it belongs to (the endpoint, its
// pipeline or run and its filters, hashed) and where the page ends, so a
// token passed to another query is refused rather than read as a position
// in it.

// Page sizes of the paged answers: the default when limit is not given,
// and the most one page holds.
const (
	PageDefault = 200
	PageMax     = 1000
)

const pageVersion = "p1"

// pageScope is what a page token is bound to: the endpoint and every
// parameter that selects its rows, but not the page size.
func pageScope(endpoint string, q *query, filters ...string) string {
	var b strings.Builder
	b.WriteString(endpoint)
	for _, f := range filters {
		fmt.Fprintf(&b, "\x00%s=%s", f, strings.Join(q.v[f], "\x01"))
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:8])
}

// pageToken is the token of the page that starts after cursor, in scope.
func pageToken(scope, cursor string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(pageVersion + "." + scope + "." + cursor))
}

// page reads the page size (limit, from 1 to PageMax, PageDefault when
// absent) and the page token of q, returning the cursor the token carries
// ("" for the first page). A malformed token, or one of another scope, is
// recorded as q's error, naming the parameter.
func (q *query) page(scope string) (limit int, cursor string) {
	limit = int(q.int("limit", PageDefault, 1, PageMax))
	tok := q.str("page")
	if tok == "" {
		return limit, ""
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	parts := strings.SplitN(string(raw), ".", 3)
	if err != nil || len(parts) != 3 || parts[0] != pageVersion || parts[2] == "" {
		q.errs = append(q.errs, fmt.Sprintf("page=%q: not a page token of this server; pass the next_page of the previous answer unchanged, or leave page out for the first page", clip(tok)))
		return limit, ""
	}
	if parts[1] != scope {
		q.errs = append(q.errs, fmt.Sprintf("page=%q: the token belongs to another query (another pipeline, run or filter); read on with the same parameters as the page it came from, or leave page out to start again", clip(tok)))
		return limit, ""
	}
	return limit, parts[2]
}

// clip shortens a parameter echoed in an error.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ax-sched/ax/api/apitest"
)

// FuzzAPIRequest sends arbitrary requests to the admin API (a standby's, so
// reads hit the store and writes are refused) and decodes arbitrary bodies
// into every request type: nothing panics, nothing is a 500, and every
// error is a JSON {"error"}.
func FuzzAPIRequest(f *testing.F) {
	for _, rq := range badRequests {
		f.Add(rq.method, rq.path, rq.body)
	}
	f.Add("GET", "/api/v1/instances?state=RUNNING&state=failed&limit=3&before=9", "")
	f.Add("POST", "/api/v1/backfills", `{"pipeline":"shop","from":"2026-01-01","to":"2026-01-02","max_active_runs":-3}`)
	f.Add("PUT", "/api/v1/limits", `{"global":1e309}`)
	f.Add("GET", "/api/v1/pipelines/%00/tasks/%2e%2e", "")
	e := setupAPI(f, apitest.Opts{Standby: true})
	h := e.Srv.Config.Handler
	f.Fuzz(func(t *testing.T, method, target, body string) {
		if !strings.HasPrefix(target, "/") || strings.ContainsAny(target, " \r\n") || method == "" || strings.ContainsAny(method, " \r\n/") {
			return // not a request line an HTTP server would parse
		}
		req, err := http.NewRequest(method, "http://ax.test"+target, strings.NewReader(body))
		if err != nil {
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s %s %q: %d %s", method, target, body, rec.Code, rec.Body)
		}
		if rec.Code >= 400 && strings.HasPrefix(req.URL.Path, "/api/") {
			var e map[string]string
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e["error"] == "" {
				t.Fatalf("%s %s: %d without a JSON error: %s", method, target, rec.Code, rec.Body)
			}
		}
		for _, v := range []any{&opBody{}, &BackfillRequest{}, &struct {
			Global *float64           `json:"global"`
			Groups map[string]float64 `json:"groups"`
		}{}} {
			r, _ := http.NewRequest("POST", "http://ax.test/", strings.NewReader(body))
			r.ContentLength = int64(len(body))
			if err := decodeBody(r, v); err != nil {
				if ae, ok := err.(*apiErr); !ok || ae.code/100 != 4 {
					t.Fatalf("decode %q: %v is not a 4xx", body, err)
				}
			}
		}
	})
}

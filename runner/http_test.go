package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func httpExec(t *testing.T, handler http.HandlerFunc) *HTTP {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return NewHTTP(srv.Client(), func(Attempt) (string, error) { return srv.URL + "/tasks/clean", nil })
}

func TestHTTPDispatchAndReport(t *testing.T) {
	t.Parallel()
	var got Dispatch
	h := httpExec(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Ax-Protocol") != "1" || r.URL.Path != "/tasks/clean" {
			http.Error(w, "bad request", 400)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		fmt.Fprintf(w, `{"ticket":%q,"status":"success","duration_ms":42,"output":"3 rows"}`, got.Ticket)
	})
	a := attempt("tk-h")
	a.Deadline = time.Now().Add(time.Minute)
	r, err := h.Execute(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != StatusSuccess || r.Duration != 42*time.Millisecond || string(r.Output) != "3 rows" || r.Ticket != "tk-h" {
		t.Errorf("result %+v", r)
	}
	if got.Version != 1 || got.Ticket != "tk-h" || got.Task != "clean" || got.InstanceID != 7 || !got.LogicalTime.Equal(logical) || got.Params["region"] != "cn" {
		t.Errorf("dispatch %+v", got)
	}
}

// An attempt's traceparent goes in the dispatch's header and field; none
// goes when the attempt has none (runs not traced).
func TestHTTPDispatchCarriesTheTraceParent(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, want := range []string{tp, ""} {
		var header string
		var got Dispatch
		h := httpExec(t, func(w http.ResponseWriter, r *http.Request) {
			header = r.Header.Get("traceparent")
			if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			fmt.Fprintf(w, `{"ticket":%q,"status":"success"}`, got.Ticket)
		})
		a := attempt("tk-t")
		a.TraceParent = want
		if r, err := h.Execute(context.Background(), a); err != nil || r.Status != StatusSuccess {
			t.Fatalf("%+v %v", r, err)
		}
		if header != want || got.TraceParent != want {
			t.Errorf("traceparent header %q, field %q: want %q", header, got.TraceParent, want)
		}
	}
}

// TestHTTPMalformedReports: every bad answer fails the attempt with a clear
// reason; none is taken for a success.
func TestHTTPMalformedReports(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		code   int
		body   string
		want   string
		status Status
	}{
		{"not json", 200, "<html>oops</html>", "malformed report: invalid character '<'", StatusFailed},
		{"wrong ticket", 200, `{"ticket":"other","status":"success"}`, `malformed report: ticket "other", want "tk"`, StatusFailed},
		{"unknown status", 200, `{"ticket":"tk","status":"done"}`, `malformed report: status "done"`, StatusFailed},
		{"unknown field", 200, `{"ticket":"tk","status":"success","extra":1}`, `unknown field "extra"`, StatusFailed},
		{"two objects", 200, `{"ticket":"tk","status":"success"}{}`, "data after the JSON object", StatusFailed},
		{"oversized", 200, `{"ticket":"tk","status":"success","output":"` + strings.Repeat("x", maxReport) + `"}`, "larger than", StatusFailed},
		{"refused", 503, "pool full", "refused the dispatch (503 Service Unavailable): pool full", StatusFailed},
		{"server error", 500, "boom", "answered 500 Internal Server Error: boom", StatusFailed},
		{"task failed", 200, `{"ticket":"tk","status":"failed","error":"no rows","permanent":true}`, "no rows", StatusFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := httpExec(t, func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.WriteHeader(tc.code)
				io.WriteString(w, tc.body)
			})
			r, err := h.Execute(context.Background(), attempt("tk"))
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != tc.status || !strings.Contains(r.Error, tc.want) {
				t.Errorf("result %s %q, want %s containing %q", r.Status, r.Error, tc.status, tc.want)
			}
		})
	}
}

func TestHTTPUnreachableAndDeadline(t *testing.T) {
	t.Parallel()
	h := NewHTTP(http.DefaultClient, func(Attempt) (string, error) { return "http://127.0.0.1:1/x", nil })
	r, _ := h.Execute(context.Background(), attempt("tk"))
	if r.Status != StatusFailed || r.Permanent || !strings.Contains(r.Error, "connection refused") {
		t.Errorf("unreachable: %+v", r)
	}
	block := make(chan struct{})
	slow := httpExec(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(block) }) // runs before the server's Close, which waits for the handler
	a := attempt("tk")
	a.Deadline = time.Now().Add(100 * time.Millisecond)
	if r, _ := slow.Execute(context.Background(), a); r.Status != StatusTimeout {
		t.Errorf("never answers: %+v", r)
	}
}

// TestHTTPStopForwardedToExecutor: an asynchronous attempt whose context
// ends with a kill, or with the scheduler's shutdown (which gives the
// attempt back to run again), asks the executor to stop the ticket's work:
// else a given-back attempt ran on while the next scheduler dispatched it
// again (found by the simulator: TestSimShutdownStopsRemoteWork). The
// attempt's own deadline sends nothing: the executor has it too.
func TestHTTPStopForwardedToExecutor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		cause error
		want  string // the ticket killed, or none
	}{
		{"kill", ErrKilled, "tk"},
		{"shutdown", ErrInterrupted, "tk"},
		{"wrapped shutdown", fmt.Errorf("engine: interrupted by shutdown: %w", ErrInterrupted), "tk"},
		{"other cancel", context.Canceled, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			killed := make(chan string, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/dispatch":
					io.Copy(io.Discard, r.Body)
					w.WriteHeader(http.StatusAccepted)
					io.WriteString(w, `{"accepted":true,"boot":"b1"}`)
				case "/kill":
					var k struct{ Ticket string }
					json.NewDecoder(r.Body).Decode(&k)
					killed <- k.Ticket
				}
			}))
			t.Cleanup(srv.Close)
			h := NewHTTP(srv.Client(), func(Attempt) (string, error) { return srv.URL + "/dispatch", nil }).WithCallback("http://127.0.0.1:1/results")
			ctx, cancel := context.WithCancelCause(context.Background())
			h.accepted = func(string, string) { cancel(tc.cause) } // the attempt ends once the executor took it
			r, err := h.Execute(ctx, attempt("tk"))
			if err != nil || r.Status == StatusSuccess {
				t.Fatalf("result %+v, %v", r, err)
			}
			got := ""
			select {
			case got = <-killed:
			default:
			}
			if got != tc.want {
				t.Errorf("kill sent for %q, want %q", got, tc.want)
			}
		})
	}
}

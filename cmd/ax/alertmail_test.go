package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/emersion/go-smtp"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/ax-sched/ax/cli"
)

// mailbox is a go-smtp backend that keeps the mails' data.
type mailbox struct {
	mu    sync.Mutex
	mails []string
}

func (b *mailbox) NewSession(*smtp.Conn) (smtp.Session, error) { return &mailSession{b: b}, nil }

func (b *mailbox) got() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.mails...)
}

type mailSession struct{ b *mailbox }

func (s *mailSession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *mailSession) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s *mailSession) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	s.b.mu.Lock()
	s.b.mails = append(s.b.mails, string(data))
	s.b.mu.Unlock()
	return err
}
func (s *mailSession) Reset()        {}
func (s *mailSession) Logout() error { return nil }

// TestServerMailsAlertsAndTracesRuns: a real server with --alert-mail and
// an OTLP endpoint in its environment mails its failures and exports its
// runs' spans; bad mail settings
// stop it before it opens its store.
func TestServerMailsAlertsAndTracesRuns(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	box := &mailbox{}
	ms := smtp.NewServer(box)
	ms.Domain = "localhost"
	go func() { _ = ms.Serve(ln) }()
	defer ms.Close()
	var spans sync.Map
	otlp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if proto.Unmarshal(data, &req) == nil {
			for _, rs := range req.ResourceSpans {
				for _, ss := range rs.ScopeSpans {
					for _, s := range ss.Spans {
						spans.Store(s.Name, true)
					}
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer otlp.Close()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "p.yaml"), "pipeline: p\ngroup: etl\ntimezone: UTC\nschedule: \"@every 1s\"\ntasks:\n  - {name: bad, command: [\"false\"]}\n")
	db := filepath.Join(dir, "ax.db")
	for args, want := range map[string]string{
		"--alert-mail to=oncall":                                                                     `--alert-mail "to=oncall": to "oncall" is not a mail address`,
		"--alert-mail to=a@example.com --smtp-from ax@example.com":                                   `--smtp-server "": give host:port`,
		"--smtp-server " + ln.Addr().String():                                                        `--smtp-* is given but no --alert-mail`,
		"--alert-mail to=a@example.com --smtp-server h:25 --smtp-from ax@example.com --smtp-user ax": `--smtp-user and --smtp-password go together`,
	} {
		code, _, errOut := runAx(t, append([]string{"server", "--store", db, "--pipelines", dir, "--listen", ""}, strings.Fields(args)...)...)
		if code != cli.ExitUsage || !strings.Contains(errOut, want) {
			t.Errorf("%s: exit %d, %s: want %q", args, code, errOut, want)
		}
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("a server refused for bad mail settings created its store (%v)", err)
	}
	srv := startServerEnv(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + otlp.URL, "OTEL_BSP_SCHEDULE_DELAY=100"}, db, dir,
		"--alert-mail", "kind=task_failed,to=oncall@example.com", "--smtp-server", ln.Addr().String(), "--smtp-from", "ax@example.com")
	waitFor(t, func() bool { return len(box.got()) > 0 })
	waitFor(t, func() bool { _, run := spans.Load("run p"); _, task := spans.Load("p.bad"); return run && task })
	srv.stop(t)
	if m := box.got()[0]; !strings.Contains(m, "Subject: [ax] task_failed: p.bad") || !strings.Contains(m, "Task: p.bad") {
		t.Errorf("mail:\n%s", m)
	}
}

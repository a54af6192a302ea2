package alertroute

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"mime"
	"mime/multipart"
	"net"
	"net/mail"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ax-sched/ax/engine"
)

// received is a mail an SMTP server of the tests took.
type received struct {
	from       string
	to         []string
	data       []byte
	tls        bool
	user, pass string
}

// backend is a go-smtp server's backend that keeps every mail.
type backend struct {
	mu    sync.Mutex
	mails []received
	// inData, when set, is called when a mail's data has come, before the
	// server answers it.
	inData func()
}

func (b *backend) NewSession(c *smtp.Conn) (smtp.Session, error) { return &session{b: b, c: c}, nil }

func (b *backend) got() []received {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]received(nil), b.mails...)
}

type session struct {
	b   *backend
	c   *smtp.Conn
	cur received
}

func (s *session) AuthMechanisms() []string { return []string{sasl.Plain} }
func (s *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		s.cur.user, s.cur.pass = user, pass
		return nil
	}), nil
}
func (s *session) Mail(from string, _ *smtp.MailOptions) error { s.cur.from = from; return nil }
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.cur.to = append(s.cur.to, to)
	return nil
}
func (s *session) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.cur.data = data
	if s.b.inData != nil {
		s.b.inData()
	}
	_, s.cur.tls = s.c.TLSConnectionState()
	s.b.mu.Lock()
	s.b.mails = append(s.b.mails, s.cur)
	s.b.mu.Unlock()
	return nil
}
func (s *session) Reset()        { s.cur = received{user: s.cur.user, pass: s.cur.pass} }
func (s *session) Logout() error { return nil }

// serveSMTP serves a go-smtp server on ln (STARTTLS offered when cfg is
// set) until the test ends.
func serveSMTP(t *testing.T, ln net.Listener, cfg *tls.Config) *backend {
	t.Helper()
	be := &backend{}
	s := smtp.NewServer(be)
	s.Domain = "localhost"
	s.TLSConfig = cfg
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(func() { _ = s.Close() })
	return be
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// logs keeps what a logger writes, for the tests to poll.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// eventually polls cond until it holds, failing the test after 10s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not after 10s: %s", what)
		}
	}
}

var failure = engine.Alert{Kind: engine.AlertTaskFailed, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Pipeline: "orders_daily",
	Task: "orders_daily.clean_orders", Group: "etl", Run: 41, Logical: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), Instance: 7,
	Message: `exit status 3: "orders <db>" unreachable`, Scheduler: "ax-1"}

// start starts mail routes through srv, with a registry and logs of
// their own; stop stops them and returns the wait for their last mails.
func start(t *testing.T, specs []string, srv *MailServer) (send func(engine.Alert), reg *prometheus.Registry, lg *logs, stop func() (wait func())) {
	t.Helper()
	var routes []MailRoute
	for _, spec := range specs {
		r, err := ParseMail(spec)
		if err != nil {
			t.Fatal(err)
		}
		routes = append(routes, r)
	}
	reg, lg = prometheus.NewRegistry(), &logs{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	send, wait, err := StartMail(ctx, routes, srv, slog.New(slog.NewTextHandler(lg, nil)), reg)
	if err != nil {
		t.Fatal(err)
	}
	return send, reg, lg, func() func() { cancel(); return wait }
}

func failedCount(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "ax_alert_delivery_failed_total" {
			for _, m := range mf.GetMetric() {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// parts reads a received mail: its subject and its text and HTML parts.
func parts(t *testing.T, data []byte) (subject, text, html string) {
	t.Helper()
	m, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	subject, err = new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	if err != nil {
		t.Fatal(err)
	}
	mt, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/alternative" {
		t.Fatalf("content type %q: %v", m.Header.Get("Content-Type"), err)
	}
	mr := multipart.NewReader(m.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return subject, text, html
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p)
		switch ct := p.Header.Get("Content-Type"); {
		case strings.HasPrefix(ct, "text/plain"):
			text = string(b)
		case strings.HasPrefix(ct, "text/html"):
			html = string(b)
		}
	}
}

func TestFailureAlertMailed(t *testing.T) {
	t.Parallel()
	ln := listen(t)
	be := serveSMTP(t, ln, nil)
	srv := &MailServer{Addr: ln.Addr().String(), From: "ax@example.com", Console: "https://ax.example.com/"}
	send, reg, _, _ := start(t, []string{"kind=task_failed,group=etl,to=oncall@example.com|data@example.com"}, srv)
	other := failure
	other.Group = "web" // not the route's group
	send(other)
	send(failure)
	eventually(t, "a mail received", func() bool { return len(be.got()) == 1 })
	m := be.got()[0]
	if m.from != "ax@example.com" || strings.Join(m.to, ",") != "oncall@example.com,data@example.com" || m.tls {
		t.Errorf("envelope from %q to %q tls %v", m.from, m.to, m.tls)
	}
	subject, text, html := parts(t, m.data)
	if subject != "[ax] task_failed: orders_daily.clean_orders" {
		t.Errorf("subject %q", subject)
	}
	for _, want := range []string{"Pipeline: orders_daily", "Task: orders_daily.clean_orders", "Logical time: 2026-01-02T00:00:00Z",
		`Error: exit status 3: "orders <db>" unreachable`, "Console: https://ax.example.com/#/r/41"} {
		if !strings.Contains(text, want) {
			t.Errorf("text part lacks %q:\n%s", want, text)
		}
	}
	for _, want := range []string{"<th align=\"left\">Pipeline</th><td>orders_daily</td>", "2026-01-02T00:00:00Z",
		"exit status 3: &#34;orders &lt;db&gt;&#34; unreachable", `<a href="https://ax.example.com/#/r/41">`} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML part lacks %q:\n%s", want, html)
		}
	}
	if n := failedCount(t, reg); n != 0 {
		t.Errorf("delivery failures counted: %v", n)
	}
}

// A storm of 1,000 failures sends the first at once and the rest in one
// digest, not 1,000 mails.
func TestStormDigested(t *testing.T) {
	t.Parallel()
	ln := listen(t)
	be := serveSMTP(t, ln, nil)
	send, _, _, stop := start(t, []string{"to=oncall@example.com,every=1h"}, &MailServer{Addr: ln.Addr().String(), From: "ax@example.com"})
	send(failure)
	eventually(t, "the first alert mailed at once", func() bool { return len(be.got()) == 1 })
	for i := range 999 {
		a := failure
		a.Instance = int64(1000 + i)
		send(a)
	}
	stop() // the hour has not passed: the digest goes as the server stops
	eventually(t, "the digest mailed", func() bool { return len(be.got()) == 2 })
	got := be.got()
	if s, _, _ := parts(t, got[0].data); s != "[ax] task_failed: orders_daily.clean_orders" {
		t.Errorf("first mail %q", s)
	}
	subject, text, html := parts(t, got[1].data)
	if subject != "[ax] 999 alerts (digest): 999 task_failed" {
		t.Errorf("digest subject %q", subject)
	}
	if n := strings.Count(text, "task_failed: orders_daily.clean_orders"); n != maxListed || !strings.Contains(text, "… and 949 more") {
		t.Errorf("digest lists %d alerts, want %d and the 949 more counted:\n%s", n, maxListed, text[:min(len(text), 400)])
	}
	if !strings.Contains(html, "999 alerts since the last mail") || !strings.Contains(html, "and 949 more") {
		t.Errorf("HTML digest:\n%s", html[:min(len(html), 400)])
	}
	// Every alert is in one of the two mails: no third can come.
	if n := len(be.got()); n != 2 {
		t.Errorf("%d mails for 1,000 alerts, want 2", n)
	}
}

// selfSigned returns a server configuration with a certificate for
// 127.0.0.1, and a client configuration that trusts it.
func selfSigned(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
		&tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
}

// A server that offers STARTTLS gets the mail over TLS, and the password
// (a secret read when the mail goes) only then; one whose certificate is
// not trusted gets nothing, and the failure says why.
func TestSTARTTLS(t *testing.T) {
	t.Parallel()
	serverTLS, clientTLS := selfSigned(t)
	ln := listen(t)
	be := serveSMTP(t, ln, serverTLS)
	password := func(context.Context) (string, error) { return "s3cret", nil }
	srv := &MailServer{Addr: ln.Addr().String(), From: "ax@example.com", User: "ax", Password: password, TLS: clientTLS}
	send, _, _, _ := start(t, []string{"to=oncall@example.com"}, srv)
	send(failure)
	eventually(t, "a mail received", func() bool { return len(be.got()) == 1 })
	if m := be.got()[0]; !m.tls || m.user != "ax" || m.pass != "s3cret" {
		t.Errorf("mail over TLS %v, authenticated as %q/%q: want TLS, ax/s3cret", m.tls, m.user, m.pass)
	}

	ln2 := listen(t)
	be2 := serveSMTP(t, ln2, serverTLS)
	untrusted := &MailServer{Addr: ln2.Addr().String(), From: "ax@example.com", User: "ax", Password: password, Attempts: 1}
	send2, reg, lg, _ := start(t, []string{"to=oncall@example.com"}, untrusted)
	send2(failure)
	eventually(t, "the delivery failure logged", func() bool { return strings.Contains(lg.String(), "alert_delivery_failed") })
	if !strings.Contains(lg.String(), "STARTTLS") || !strings.Contains(lg.String(), "fix its certificate, or trust its authority") {
		t.Errorf("log %s: want the STARTTLS failure named", lg)
	}
	if n := failedCount(t, reg); n != 1 || len(be2.got()) != 0 {
		t.Errorf("failures %v, mails %d: want 1 and none", n, len(be2.got()))
	}
}

// A server that is down is retried, and mailed when it is back; one that
// stays down counts the alert in alert_delivery_failed and logs it, never
// blocking whoever raised it.
func TestServerDownAndBack(t *testing.T) {
	t.Parallel()
	ln := listen(t)
	addr := ln.Addr().String()
	ln.Close() // down: connections refused
	send, reg, lg, _ := start(t, []string{"to=oncall@example.com"}, &MailServer{Addr: addr, From: "ax@example.com", Attempts: 1000, Backoff: 10 * time.Millisecond})
	send(failure)
	eventually(t, "a retry logged", func() bool { return strings.Contains(lg.String(), "alert_mail_retry") })
	if !strings.Contains(lg.String(), "is the server up? check --smtp-server") {
		t.Errorf("log %s: want the refusal explained", lg)
	}
	back, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port %s was taken meanwhile: %v", addr, err)
	}
	be := serveSMTP(t, back, nil)
	eventually(t, "the mail received once the server is back", func() bool { return len(be.got()) == 1 })
	if n := failedCount(t, reg); n != 0 {
		t.Errorf("failures %v, want none: it was delivered", n)
	}

	ln2 := listen(t)
	addr2 := ln2.Addr().String()
	ln2.Close()
	send2, reg2, lg2, _ := start(t, []string{"to=oncall@example.com"}, &MailServer{Addr: addr2, From: "ax@example.com", Attempts: 3, Backoff: time.Millisecond})
	send2(failure)
	send2(failure) // returns at once, the first still being retried
	eventually(t, "the delivery failure counted", func() bool { return failedCount(t, reg2) >= 1 })
	if l := lg2.String(); strings.Count(l, "alert_mail_retry") < 2 || !strings.Contains(l, "level=ERROR msg=alert_delivery_failed target=mail to=oncall@example.com") {
		t.Errorf("log %s: want two retries then alert_delivery_failed", l)
	}
}

// A peer that answers something that is not SMTP is contained: the mail
// fails with a message that says so, counted and logged.
func TestServerAnsweringGarbage(t *testing.T) {
	t.Parallel()
	ln := listen(t)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	send, reg, lg, _ := start(t, []string{"to=oncall@example.com"}, &MailServer{Addr: ln.Addr().String(), From: "ax@example.com", Attempts: 2, Backoff: time.Millisecond})
	send(failure)
	eventually(t, "the delivery failure counted", func() bool { return failedCount(t, reg) == 1 })
	if l := lg.String(); !strings.Contains(l, "greeting: it does not speak SMTP") || !strings.Contains(l, "is --smtp-server an SMTP server?") {
		t.Errorf("log %s: want the garbage named", l)
	}
}

func TestParseMailRefusesBadRoutes(t *testing.T) {
	for spec, want := range map[string]string{
		"kind=task_failed":                       `no to=: say who receives the alerts`,
		"to=oncall":                              `to "oncall" is not a mail address`,
		"to=Ops <ops@example.com>":               `is not a mail address: write name@domain`,
		"to=a@example.com,kind=task_faild":       `kind "task_faild" is not an alert kind`,
		"to=a@example.com,to=b@example.com":      `to= is given twice`,
		"to=a@example.com,every=10ms":            `every "10ms": give a duration from 1s to 168h0m0s, such as 5m`,
		"to=a@example.com,every=2562048h":        `every "2562048h": give a duration from 1s to 168h0m0s`,
		"to=a@example.com,every=169h":            `every "169h": give a duration from 1s to 168h0m0s`,
		"to=a@example.com,url=https://x.example": `"url=https://x.example" is not a setting`,
		"https://hooks.example/x":                `is not a setting: write kind=…, group=…, to=…, every=…`,
	} {
		_, err := ParseMail(spec)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", spec, err, want)
		}
	}
	if r, err := ParseMail("kind=task_failed|sla_missed,group=etl,to=a@example.com|b@example.com,every=10m"); err != nil ||
		len(r.kinds) != 2 || len(r.to) != 2 || r.every != 10*time.Minute || r.groups[0] != "etl" {
		t.Errorf("route %+v, %v", r, err)
	}
}

func TestMailServerCheck(t *testing.T) {
	pw := func(context.Context) (string, error) { return "", nil }
	for _, c := range []struct {
		srv  MailServer
		want string
	}{
		{MailServer{Addr: "smtp.example.com", From: "ax@example.com"}, `--smtp-server "smtp.example.com": give host:port`},
		{MailServer{Addr: "smtp.example.com:smtp", From: "ax@example.com"}, `port "smtp" is not a port number`},
		{MailServer{Addr: "smtp.example.com:587", From: "ax"}, `--smtp-from "ax": give the sender's address`},
		{MailServer{Addr: "smtp.example.com:587", From: "ax@example.com", User: "ax"}, `--smtp-user and --smtp-password go together`},
		{MailServer{Addr: "smtp.example.com:587", From: "ax@example.com", Password: pw}, `--smtp-user and --smtp-password go together`},
	} {
		if err := c.srv.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.srv, err, c.want)
		}
	}
}

// hostile serves each connection with talk until the test ends.
func hostile(t *testing.T, talk func(c net.Conn)) string {
	t.Helper()
	ln := listen(t)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				talk(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// A server that streams an endless reply is cut off after maxReply
// bytes: the delivery fails at once, saying so, instead of reading on.
func TestEndlessReplyCutOff(t *testing.T) {
	t.Parallel()
	for name, chunk := range map[string]string{
		"continuation lines": "220-" + strings.Repeat("A", 1000) + "\r\n",
		"one endless line":   strings.Repeat("A", 1000),
	} {
		addr := hostile(t, func(c net.Conn) {
			if name == "one endless line" {
				_, _ = c.Write([]byte("220 "))
			}
			for {
				if _, err := c.Write([]byte(chunk)); err != nil {
					return
				}
			}
		})
		srv := &MailServer{Addr: addr, From: "ax@example.com", Timeout: 20 * time.Second}
		began := time.Now()
		err := srv.send(context.Background(), []string{"oncall@example.com"}, []byte("x"))
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("the server's reply exceeded %d bytes", maxReply)) {
			t.Errorf("%s: error %v, want the reply's size named", name, err)
		}
		if d := time.Since(began); d > 10*time.Second {
			t.Errorf("%s: took %s: want it cut off, not timed out", name, d)
		}
	}
}

// A server that drips its greeting a byte at a time fails the delivery
// as a timeout, not as a peer that does not speak SMTP.
func TestDrippingServerTimesOut(t *testing.T) {
	t.Parallel()
	addr := hostile(t, func(c net.Conn) {
		for {
			if _, err := c.Write([]byte("2")); err != nil {
				return
			}
			time.Sleep(50 * time.Millisecond) // the server's pace, not a wait for the code under test
		}
	})
	srv := &MailServer{Addr: addr, From: "ax@example.com", Timeout: 20 * time.Second, CommandTimeout: 300 * time.Millisecond}
	err := srv.send(context.Background(), []string{"oncall@example.com"}, []byte("x"))
	if err == nil || !strings.Contains(err.Error(), "timed out: the server did not finish a reply within 300ms") || errors.Is(err, errNotSMTP) {
		t.Errorf("error %v: want a timeout", err)
	}
}

// A mail in flight when the routes stop is completed within the grace
// (the session's timeout); one the server does not finish in it is
// counted and logged, before wait returns.
func TestShutdownCompletesOrLogsTheMailInFlight(t *testing.T) {
	t.Parallel()
	for _, finish := range []bool{true, false} {
		ln := listen(t)
		be := serveSMTP(t, ln, nil)
		arrived, release := make(chan struct{}), make(chan struct{})
		be.inData = func() {
			close(arrived)
			if finish {
				<-release
			} else {
				<-t.Context().Done()
			}
		}
		timeout := 10 * time.Second
		if !finish {
			timeout = 300 * time.Millisecond
		}
		send, reg, lg, stop := start(t, []string{"to=oncall@example.com"}, &MailServer{Addr: ln.Addr().String(), From: "ax@example.com", Timeout: timeout})
		send(failure)
		<-arrived
		wait := stop()
		if finish {
			close(release) // the server answers the data after the routes stopped
		}
		stopped := make(chan struct{})
		go func() { wait(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(15 * time.Second):
			t.Fatalf("finish %v: stop did not return", finish)
		}
		switch got, l := len(be.got()), lg.String(); {
		case finish && (got != 1 || failedCount(t, reg) != 0 || strings.Contains(l, "alert_delivery_failed")):
			t.Errorf("finish: %d mails, log %s: want the mail in flight delivered", got, l)
		case !finish && (failedCount(t, reg) != 1 || !strings.Contains(l, "alert_delivery_failed") || !strings.Contains(l, "alerts=1")):
			t.Errorf("no finish: log %s: want the mail in flight counted and logged", l)
		}
	}
}

// The routes docs/operating.md shows are accepted as written.
func TestDocumentedRoutesParse(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range regexp.MustCompile(`--alert-(mail|webhook) '([^']+)'`).FindAllStringSubmatch(string(doc), -1) {
		n++
		parse := func(spec string) error { _, err := ParseMail(spec); return err }
		if m[1] == "webhook" {
			parse = func(spec string) error { _, err := Parse(spec); return err }
		}
		if err := parse(m[2]); err != nil {
			t.Errorf("docs/operating.md: --alert-%s '%s': %v", m[1], m[2], err)
		}
	}
	if n < 2 {
		t.Errorf("%d routes found in docs/operating.md, want the mail and webhook examples", n)
	}
}

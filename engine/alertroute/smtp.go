package alertroute

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/engine"
)

// MailServer is the SMTP server alert mails go through (the --smtp-*
// flags of ax server). net/smtp speaks to it: STARTTLS whenever the server
// offers it, PLAIN authentication only over TLS (or to localhost).
type MailServer struct {
	Addr string // host:port
	From string // the sender's address
	User string // "": no authentication
	// Password returns the password of User, read when a mail goes (a
	// secret reference resolved then: a rotated secret is picked up).
	Password func(context.Context) (string, error)
	// TLS is the configuration of STARTTLS; nil: the system's roots, the
	// server name Addr's host.
	TLS *tls.Config
	// Console is the console's base URL, for the links of the mails ("":
	// none).
	Console string
	// Timeout bounds one SMTP session; default 30s. Attempts is how many
	// times a mail is tried (default 5), Backoff the wait after the first
	// failure, doubled after each (default 2s, at most a minute).
	Timeout  time.Duration
	Attempts int
	Backoff  time.Duration
	// CommandTimeout bounds the wait for the server's reply to one
	// command (and for its greeting); default 10s.
	CommandTimeout time.Duration
}

// maxReply bounds the bytes of one reply of the server (a TLS handshake
// included): a server that
// sends more (endless continuation lines, a line without end) fails the
// delivery instead of filling the memory.
const maxReply = 64 << 10

func (s *MailServer) timeout() time.Duration { return cmpDefault(s.Timeout, 30*time.Second) }
func (s *MailServer) attempts() int          { return cmpDefault(s.Attempts, 5) }
func (s *MailServer) backoff() time.Duration { return cmpDefault(s.Backoff, 2*time.Second) }
func (s *MailServer) commandTimeout() time.Duration {
	return cmpDefault(s.CommandTimeout, 10*time.Second)
}

// guardConn bounds what is read from the server: each command (a write)
// allows maxReply bytes of reply, read within the command timeout (and
// within the session's deadline). It keeps why a read was cut off.
type guardConn struct {
	net.Conn
	limit    int
	wait     time.Duration
	session  time.Time // the session's deadline; zero: none
	read     int       // bytes read since the last command
	overflow bool
	timedOut bool
}

func (g *guardConn) arm() {
	g.read = 0
	dl := time.Now().Add(g.wait)
	if !g.session.IsZero() && g.session.Before(dl) {
		dl = g.session
	}
	_ = g.Conn.SetReadDeadline(dl)
}

func (g *guardConn) Write(p []byte) (int, error) {
	g.arm()
	return g.Conn.Write(p)
}

func (g *guardConn) Read(p []byte) (int, error) {
	if g.read >= g.limit {
		g.overflow = true
		return 0, errReplyTooLong
	}
	n, err := g.Conn.Read(p[:min(len(p), g.limit-g.read)])
	g.read += n
	var nerr net.Error
	if errors.As(err, &nerr) && nerr.Timeout() {
		g.timedOut = true
	}
	return n, err
}

var errReplyTooLong = fmt.Errorf("the server's reply exceeded %d bytes", maxReply)

func cmpDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Check refuses server settings that cannot work: what ax server checks
// before it starts.
func (s *MailServer) Check() error {
	host, port, err := net.SplitHostPort(s.Addr)
	if err != nil || host == "" {
		return fmt.Errorf("--smtp-server %q: give host:port, such as smtp.example.com:587", s.Addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("--smtp-server %q: port %q is not a port number", s.Addr, port)
	}
	if a, err := mail.ParseAddress(s.From); err != nil || a.Address != s.From {
		return fmt.Errorf("--smtp-from %q: give the sender's address, name@domain", s.From)
	}
	if (s.User == "") != (s.Password == nil) {
		return errors.New("--smtp-user and --smtp-password go together: give both, or neither for a server without authentication")
	}
	return nil
}

// errNotSMTP wraps what a peer answered that is not SMTP.
var errNotSMTP = errors.New("it does not speak SMTP")

// send sends msg to rcpts in one SMTP session.
func (s *MailServer) send(ctx context.Context, rcpts []string, msg []byte) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("smtp %s: %w (is the server up? check --smtp-server)", s.Addr, err)
	}
	defer conn.Close()
	g := &guardConn{Conn: conn, limit: maxReply, wait: s.commandTimeout()}
	if dl, ok := ctx.Deadline(); ok {
		g.session = dl
		_ = conn.SetDeadline(dl) // a server that stops answering ends the session
	}
	g.arm()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	host, _, _ := net.SplitHostPort(s.Addr)
	c, err := smtp.NewClient(g, host)
	if err != nil {
		return s.cutOff(ctx, g, s.fail("greeting", err))
	}
	defer c.Close()
	if err := s.session(ctx, c, host, rcpts, msg); err != nil {
		return s.cutOff(ctx, g, err)
	}
	return s.cutOff(ctx, g, c.Quit())
}

// cutOff says why err happened when the session was cut off: ctx ended
// (with its cause), a reply too long, or no reply in time.
func (s *MailServer) cutOff(ctx context.Context, g *guardConn, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(ctx.Err(), context.Canceled):
		return fmt.Errorf("smtp %s: cut off: %w", s.Addr, context.Cause(ctx))
	case g.overflow:
		return fmt.Errorf("smtp %s: %w (is --smtp-server an SMTP server?)", s.Addr, errReplyTooLong)
	case g.timedOut:
		return fmt.Errorf("smtp %s: timed out: the server did not finish a reply within %s (is it overloaded? check --smtp-server)", s.Addr,
			min(s.commandTimeout(), s.timeout()))
	}
	return err
}

// session runs an SMTP session on c: STARTTLS when offered,
// authentication, the envelope and the message.
func (s *MailServer) session(ctx context.Context, c *smtp.Client, host string, rcpts []string, msg []byte) error {
	if err := c.Hello("localhost"); err != nil {
		return s.fail("EHLO", err)
	}
	if ok, _ := c.Extension("STARTTLS"); ok {
		cfg := s.TLS
		if cfg == nil {
			cfg = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
		}
		if err := c.StartTLS(cfg); err != nil {
			return fmt.Errorf("smtp %s: STARTTLS: %w (the server offered TLS; fix its certificate, or trust its authority)", s.Addr, err)
		}
	}
	if s.User != "" {
		pw, err := s.Password(ctx)
		if err != nil {
			return fmt.Errorf("smtp %s: the password of %s: %w", s.Addr, s.User, err)
		}
		if err := c.Auth(smtp.PlainAuth("", s.User, pw, host)); err != nil {
			return fmt.Errorf("smtp %s: authentication as %s: %w (check --smtp-user and --smtp-password; a password goes over TLS only)", s.Addr, s.User, err)
		}
	}
	if err := c.Mail(s.From); err != nil {
		return s.fail("MAIL FROM", err)
	}
	for _, r := range rcpts {
		if err := c.Rcpt(r); err != nil {
			return s.fail("RCPT TO "+r, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return s.fail("DATA", err)
	}
	if _, err := w.Write(msg); err != nil {
		return s.fail("DATA", err)
	}
	if err := w.Close(); err != nil {
		return s.fail("end of DATA", err)
	}
	return nil
}

// fail names the step of an SMTP session that failed, and says so when
// the server answered something that is not SMTP.
func (s *MailServer) fail(step string, err error) error {
	var perr textproto.ProtocolError
	if errors.As(err, &perr) {
		return fmt.Errorf("smtp %s: %s: %w: %v (is --smtp-server an SMTP server?)", s.Addr, step, errNotSMTP, err)
	}
	return fmt.Errorf("smtp %s: %s: %w", s.Addr, step, err)
}

// compose writes the mail of alerts as (and more not listed): one alert
// alone, or a digest; a plain-text part and an HTML part.
func compose(s *MailServer, to []string, as []engine.Alert, more int) []byte {
	subject := subjectOf(as, more)
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	h := func(k, v string) { fmt.Fprintf(&buf, "%s: %s\r\n", k, v) }
	h("From", s.From)
	h("To", strings.Join(to, ", "))
	h("Subject", mime.QEncoding.Encode("utf-8", subject))
	h("Date", time.Now().Format(time.RFC1123Z))
	h("Message-ID", "<"+randomID()+"@ax>")
	h("MIME-Version", "1.0")
	h("Content-Type", `multipart/alternative; boundary="`+mw.Boundary()+`"`)
	buf.WriteString("\r\n")
	part := func(ctype, body string) {
		p, _ := mw.CreatePart(textproto.MIMEHeader{"Content-Type": {ctype + "; charset=utf-8"}, "Content-Transfer-Encoding": {"quoted-printable"}})
		qw := quotedprintable.NewWriter(p)
		_, _ = qw.Write([]byte(body))
		_ = qw.Close()
	}
	part("text/plain", plainBody(s.Console, as, more))
	part("text/html", htmlBody(s.Console, as, more))
	_ = mw.Close()
	return buf.Bytes()
}

func randomID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// subjectOf is a mail's subject: the alert's kind and task, or the
// digest's count.
func subjectOf(as []engine.Alert, more int) string {
	if len(as) == 1 && more == 0 {
		return "[ax] " + as[0].Kind + ": " + subjectName(as[0])
	}
	return fmt.Sprintf("[ax] %d alerts (digest): %s", len(as)+more, kindsOf(as))
}

func subjectName(a engine.Alert) string {
	switch {
	case a.Task != "":
		return a.Task
	case a.Pipeline != "":
		return a.Pipeline
	}
	return a.Scheduler
}

// kindsOf counts the alerts of as by kind, in order of first appearance.
func kindsOf(as []engine.Alert) string {
	var kinds []string
	n := map[string]int{}
	for _, a := range as {
		if n[a.Kind] == 0 {
			kinds = append(kinds, a.Kind)
		}
		n[a.Kind]++
	}
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%d %s", n[k], k)
	}
	return strings.Join(parts, ", ")
}

// fields are an alert's details, as the mail names them.
func fields(console string, a engine.Alert) [][2]string {
	var out [][2]string
	add := func(k, v string) {
		if v != "" {
			out = append(out, [2]string{k, v})
		}
	}
	add("Pipeline", a.Pipeline)
	add("Task", a.Task)
	add("Group", a.Group)
	if !a.Logical.IsZero() {
		add("Logical time", a.Logical.UTC().Format(time.RFC3339))
	}
	if a.Run != 0 {
		add("Run", strconv.FormatInt(a.Run, 10))
	}
	if a.Instance != 0 {
		add("Instance", strconv.FormatInt(a.Instance, 10))
	}
	add("Error", a.Message)
	add("At", a.At.UTC().Format(time.RFC3339))
	add("Scheduler", a.Scheduler)
	add("Console", consoleLink(console, a))
	return out
}

// consoleLink is the console's page of what alert a is about.
func consoleLink(console string, a engine.Alert) string {
	if console == "" {
		return ""
	}
	base := strings.TrimRight(console, "/") + "/#/"
	switch {
	case a.Run != 0:
		return base + "r/" + strconv.FormatInt(a.Run, 10)
	case a.Task != "":
		p, t, _ := strings.Cut(a.Task, ".")
		return base + "t/" + p + "/" + t
	case a.Pipeline != "":
		return base + "p/" + a.Pipeline
	}
	return base + "actions"
}

// maxListed bounds the alerts a digest details; the rest are counted.
const maxListed = 50

func plainBody(console string, as []engine.Alert, more int) string {
	var b strings.Builder
	if len(as) > 1 || more > 0 {
		fmt.Fprintf(&b, "%d alerts since the last mail (%s).\n", len(as)+more, kindsOf(as))
	}
	for i, a := range as {
		if i == maxListed {
			fmt.Fprintf(&b, "\n… and %d more: see the console's action log.\n", len(as)-i+more)
			return b.String()
		}
		fmt.Fprintf(&b, "\n%s: %s\n", a.Kind, subjectName(a))
		for _, f := range fields(console, a) {
			fmt.Fprintf(&b, "  %s: %s\n", f[0], f[1])
		}
	}
	if more > 0 {
		fmt.Fprintf(&b, "\n… and %d more: see the console's action log.\n", more)
	}
	return b.String()
}

var htmlMail = template.Must(template.New("mail").Parse(`<!doctype html><html><body>
{{if .Digest}}<p>{{.Count}} alerts since the last mail ({{.Kinds}}).</p>{{end}}
{{range .Alerts}}<h3>{{.Kind}}: {{.Name}}</h3><table>
{{range .Fields}}<tr><th align="left">{{index . 0}}</th><td>{{if eq (index . 0) "Console"}}<a href="{{index . 1}}">{{index . 1}}</a>{{else}}{{index . 1}}{{end}}</td></tr>
{{end}}</table>{{end}}
{{if .Rest}}<p>… and {{.Rest}} more: see the console's action log.</p>{{end}}
</body></html>`))

func htmlBody(console string, as []engine.Alert, more int) string {
	type item struct {
		Kind, Name string
		Fields     [][2]string
	}
	listed := as[:min(len(as), maxListed)]
	items := make([]item, len(listed))
	for i, a := range listed {
		items[i] = item{a.Kind, subjectName(a), fields(console, a)}
	}
	var b strings.Builder
	_ = htmlMail.Execute(&b, map[string]any{"Digest": len(as) > 1 || more > 0, "Count": len(as) + more, "Kinds": kindsOf(as),
		"Alerts": items, "Rest": len(as) - len(listed) + more})
	return b.String()
}

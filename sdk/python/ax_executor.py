"""ax_executor: run ax tasks over HTTP from Python (protocol v1).

One module, standard library only, Python 3.9 or later. It speaks the same
protocol as the Go SDK (runner/executor; see docs/protocol.md):

    from ax_executor import Executor

    executor = Executor(address="http://127.0.0.1:9091",
                        schedulers=["http://127.0.0.1:8080"],
                        token_file="executor.token", state_dir="state")

    @executor.task("sync_orders")
    def sync(ctx):
        ctx.log.info("syncing %s", ctx.logical_time.isoformat())
        if ctx.wait(2):          # True when killed or past the deadline
            return
        ctx.output("rows", 42)

    executor.serve("127.0.0.1:9091")   # until SIGINT or SIGTERM

The rules it keeps, as the Go SDK does:

- the ticket is the work's idempotency key: a ticket seen before gets its
  earlier answer, never a second run; a task already queued or running
  here is refused (409) with the reason;
- work runs in a bounded pool (core workers, at most max, a queue); a full
  queue refuses the dispatch (503) with the reason, which the scheduler
  treats as "try another executor, or later", never as a failure;
- a dispatch with a callback is answered 202 at once and its result is
  posted until a scheduler acknowledges it; without one the answer is the
  result, and a caller that hangs up cancels the work;
- with state_dir, each ticket is journalled (synced) when accepted, when
  started and with its result, so a restart keeps the boot id, answers
  status queries, delivers results not yet acknowledged, runs accepted work
  that never started and reports started work as interrupted;
- with a token, dispatch, kill and status need it; without, status is
  answered only to the configured schedulers' addresses (loopback when none).

With OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT) in its
environment, it exports a span of each attempt under the dispatch's
traceparent (ctx.traceparent), and those a handler opens with
`with ctx.span("load"):`, as OTLP/HTTP JSON from a thread of its own.

A handler raises to fail; raising Permanent fails without retries. It reads
ctx.cancelled (or calls ctx.wait) to stop when killed or past its deadline.
The attempt is reported then at once and its task freed: Python cannot stop
a thread from outside, so a handler that ignores it is abandoned, running
on unseen, its late return ignored. An async def handler runs under
asyncio.run.
"""

import asyncio
import base64
import binascii
import errno
import fcntl
import hmac
import inspect
import ipaddress
import json
import logging
import os
import random
import re
import select
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["Executor", "Context", "Permanent", "OutputRefused", "Span", "PROTOCOL_VERSION"]

PROTOCOL_VERSION = 1
MAX_DISPATCH = 1 << 20  # bytes of a request body
MAX_STATUS_TICKETS = 10000
MAX_REPORT_OUTPUT = 64 << 10  # bytes of log a result carries (its tail)
DEFAULT_TICKET_TTL = 30 * 60.0  # seconds
STREAM_LOG = 3  # the stream of a function's logger in ax's log records
MASKED = "***"

MAX_OUTPUTS = 64 << 10  # bytes of an attempt's outputs, keys and values together
_OUTPUT_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

INTERRUPTED = ("interrupted: the executor process ended while this work ran "
               "(it restarted on its state dir); the work may have taken effect in part")


class Permanent(Exception):
    """A failure that retrying cannot fix: the scheduler does not retry it."""


class OutputRefused(ValueError):
    """An output the protocol refuses (ctx.output raises it): the attempt
    fails with its message, even when the handler catches it."""


def _check_output(key, value):
    """The protocol's rules for one output (runner.CheckOutputs): the
    refusal's message, or None."""
    if not isinstance(key, str) or not _OUTPUT_KEY.match(key):
        return ("outputs: key %s is not a name: use letters, digits and _ (not starting with a digit), as {{ .Upstream.TASK.KEY }} reads it"
                % json.dumps(str(key), ensure_ascii=False))
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = "\0"
    if "\0" in value:
        return ("outputs: the value of %s is not text (it holds a NUL byte or bytes that are not UTF-8): give text, e.g. base64 of binary data" % key)
    return None


def _outputs_too_large(size):
    return "outputs: %d bytes, over the cap of %d bytes (64 KiB): give the downstream a path or a key to the data, not the data" % (size, MAX_OUTPUTS)


class _Refusal(Exception):
    def __init__(self, code, reason):
        super().__init__(reason)
        self.code, self.reason = code, reason


# --- times as Go writes them -------------------------------------------------

def _parse_time(s, field):
    """Parses an RFC 3339 time (Go's JSON form of time.Time)."""
    if not isinstance(s, str):
        raise ValueError("json: cannot unmarshal %s into Go struct field Dispatch.%s of type time.Time" % (_json_kind(s), field))
    if s == "0001-01-01T00:00:00Z":
        return None
    t = s
    if t.endswith("Z") or t.endswith("z"):
        t = t[:-1] + "+00:00"
    if "." in t:  # Python takes at most 6 fraction digits before 3.11
        head, rest = t.split(".", 1)
        i = 0
        while i < len(rest) and rest[i].isdigit():
            i += 1
        t = head + "." + (rest[:i] + "000000")[:6] + rest[i:]
    try:
        d = datetime.fromisoformat(t)
    except ValueError:
        raise ValueError("parsing time %s: not RFC 3339" % json.dumps(s))
    if d.tzinfo is None:
        raise ValueError("parsing time %s: no time zone" % json.dumps(s))
    return d


def _fmt_time(d):
    if d is None:
        return "0001-01-01T00:00:00Z"
    d = d.astimezone(timezone.utc)
    s = d.strftime("%Y-%m-%dT%H:%M:%S")
    if d.microsecond:
        s += ("." + "%06d" % d.microsecond).rstrip("0")
    return s + "Z"


def _json_kind(v):
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if v is None:
        return "null"
    return "object"


# --- the dispatch --------------------------------------------------------------

_DISPATCH_FIELDS = {
    "version": "int", "pipeline": "str", "task": "str", "instance_id": "int", "ticket": "str",
    "logical_time": "time", "deadline": "time", "params": "obj", "env": "strmap",
    "secret_env": "strlist", "callback": "str", "ticket_ttl_ms": "int", "traceparent": "str",
}


def _big_number(s):
    """A number as Go decodes one into an untyped value (a float64): one
    beyond its range is an error, in Go's words."""
    f = float(s)
    if f in (float("inf"), float("-inf")):
        raise ValueError("json: cannot unmarshal number %s into Go value of type float64"
                         % (s if len(s) <= 24 else s[:20] + "…"))
    return f


def _parse_int(s):
    return int(s) if len(s) <= 19 else _big_number(s)


def _loads(raw):
    """Parses a JSON request body; its errors are ValueErrors worded as Go's
    encoding/json words them (so an SDK's reasons do not depend on its
    language), never Python's."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")  # Go reads invalid UTF-8 as U+FFFD
    try:
        return json.loads(raw, parse_int=_parse_int, parse_float=_big_number,
                          parse_constant=lambda c: _bad_char(raw, raw.find(c)))
    except RecursionError:
        raise ValueError("exceeded max depth") from None
    except json.JSONDecodeError as e:
        if e.pos >= len(raw.rstrip()):
            raise ValueError("unexpected end of JSON input") from None
        _bad_char(raw, e.pos)


def _bad_char(raw, pos):
    raise ValueError("invalid character %s at offset %d" % (json.dumps(raw[pos], ensure_ascii=False)[1:-1].join("''"), pos + 1))


def _decode_dispatch(raw):
    """Checks a dispatch as strictly as the Go SDK: unknown fields and wrong
    types are malformed. It returns the dispatch as a dict, times parsed."""
    d = _loads(raw)
    if not isinstance(d, dict):
        raise ValueError("json: cannot unmarshal %s into Go value of type runner.Dispatch" % _json_kind(d))
    for k, v in d.items():
        kind = _DISPATCH_FIELDS.get(k)
        if kind is None:
            raise ValueError('json: unknown field "%s"' % k)
        if v is None:
            continue
        ok = {
            "int": isinstance(v, int) and not isinstance(v, bool),
            "str": isinstance(v, str),
            "time": True,
            "obj": isinstance(v, dict),
            "strmap": isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
            "strlist": isinstance(v, list) and all(isinstance(x, str) for x in v),
        }[kind]
        if not ok:
            raise ValueError("json: cannot unmarshal %s into Go struct field Dispatch.%s" % (_json_kind(v), k))
    out = dict(d)
    out["logical_time"] = _parse_time(d["logical_time"], "logical_time") if d.get("logical_time") is not None else None
    out["deadline"] = _parse_time(d["deadline"], "deadline") if d.get("deadline") is not None else None
    return out


def _dispatch_json(d):
    """The dispatch as the journal keeps it (the Go SDK's field names)."""
    out = {k: v for k, v in d.items() if v is not None}
    out["logical_time"] = _fmt_time(d.get("logical_time"))
    out["deadline"] = _fmt_time(d.get("deadline"))
    return out


def _dispatch_from_json(obj):
    d = dict(obj)
    d["logical_time"] = _parse_time(obj.get("logical_time", "0001-01-01T00:00:00Z"), "logical_time")
    d["deadline"] = _parse_time(obj.get("deadline", "0001-01-01T00:00:00Z"), "deadline")
    return d


# --- the task's output: ax's log records ----------------------------------------

class _Output:
    """The lines a task logged, as ax's log records (a header byte with the
    stream, a 4-byte big-endian length, the line), the tail kept within the
    limit of a report; secret values are masked in every line."""

    def __init__(self, secrets, limit=MAX_REPORT_OUTPUT):
        self._mu = threading.Lock()
        self._lines = deque()
        self._size = 0
        self._limit = limit
        self.dropped = 0
        # A secret of several lines is masked whole and each of its lines on
        # its own (its empty lines are not secrets); the longest first, so
        # that a secret holding another is masked whole.
        values = set()
        for s in secrets:
            if s:
                values.add(s)
            if "\n" in s:
                values.update(x.rstrip("\r") for x in s.split("\n") if x.rstrip("\r"))
        self._secrets = sorted(values, key=len, reverse=True)

    def mask(self, text):
        for s in self._secrets:
            text = text.replace(s, MASKED)
        return text

    def write_line(self, text):
        for line in self.mask(text).split("\n"):
            b = line.encode("utf-8", "replace")[: self._limit - 5]
            rec = bytes([STREAM_LOG]) + len(b).to_bytes(4, "big") + b
            with self._mu:
                self._lines.append(rec)
                self._size += len(rec)
                while self._size > self._limit:
                    old = self._lines.popleft()
                    self._size -= len(old)
                    self.dropped += len(old) - 5

    def take(self):
        with self._mu:
            return b"".join(self._lines), self.dropped


class _OutputHandler(logging.Handler):
    """Writes a task's log records into its output, in the Go SDK's text form
    (time=… level=INFO msg=… key=value)."""

    def __init__(self, out):
        super().__init__(logging.DEBUG)
        self.out = out

    def emit(self, record):
        try:
            self.out.write_line(_logfmt(record, _record_fields(record)))
        except Exception:  # a log line never fails the task
            self.handleError(record)


_LEVELS = {"WARNING": "WARN", "CRITICAL": "ERROR"}
_STD_ATTRS = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


def _record_fields(record):
    return {k: v for k, v in vars(record).items() if k not in _STD_ATTRS}


def _logfmt(record, fields):
    ts = datetime.fromtimestamp(record.created, timezone.utc).astimezone().isoformat(timespec="milliseconds")
    parts = ["time=" + ts, "level=" + _LEVELS.get(record.levelname, record.levelname), "msg=" + _quote(record.getMessage())]
    for k, v in fields.items():
        parts.append("%s=%s" % (k, _quote(v if isinstance(v, str) else json.dumps(v, default=str))))
    if record.exc_info:
        parts.append("err=" + _quote("".join(traceback.format_exception(*record.exc_info)).strip()))
    return " ".join(parts)


def _quote(s):
    s = str(s)
    if s and not any(c in s for c in ' ="\\') and s.isprintable():
        return s
    return json.dumps(s, ensure_ascii=False)


class _LogfmtFormatter(logging.Formatter):
    def format(self, record):
        return _logfmt(record, _record_fields(record))


def _default_logger():
    log = logging.getLogger("ax_executor")
    if not log.handlers:
        h = logging.StreamHandler(sys.stderr)
        h.setFormatter(_LogfmtFormatter())
        log.addHandler(h)
        log.setLevel(logging.INFO)
        log.propagate = False
    return log


# --- traces: OTLP/HTTP JSON -----------------------------------------------------------

_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?\Z", re.S)
TRACE_QUEUE = 2048  # spans waiting for the sender; past it new spans are dropped (and counted)
TRACE_BATCH = 512   # spans in one export request


def _parse_traceparent(tp):
    """The W3C traceparent's (trace id, parent span id, sampled), or None
    when it is malformed: version ff, version 00 with more after the flags,
    an all-zero id, or anything not lowercase hex in its place."""
    m = _TRACEPARENT.match(tp) if isinstance(tp, str) else None
    if m is None:
        return None
    version, tid, sid, flags, rest = m.groups()
    if version == "ff" or (version == "00" and rest) or tid == "0" * 32 or sid == "0" * 16:
        return None
    return tid, sid, bool(int(flags, 16) & 1)


def _new_id(n):
    while True:
        b = os.urandom(n)
        if any(b):
            return b.hex()


def _otlp_value(v):
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": str(v)}


def _otlp_attrs(attrs):
    return [{"key": k, "value": _otlp_value(v)} for k, v in attrs.items()]


def _otel_pairs(s):
    """OTEL_RESOURCE_ATTRIBUTES and OTEL_EXPORTER_OTLP_HEADERS: k=v,k=v (URL-encoded)."""
    out = {}
    for part in (s or "").split(","):
        k, eq, v = part.partition("=")
        if eq and k.strip():
            out[urllib.parse.unquote(k.strip())] = urllib.parse.unquote(v.strip())
    return out


class Span:
    """A span of an attempt's trace. ctx.span(name) opens one (a context
    manager); set_attribute adds to it. Spans export only when the
    executor's environment names an OTLP endpoint."""

    def __init__(self, tracer, name, trace_id, parent_id, kind=1, attrs=None, sampled=True):
        self._tracer, self.name = tracer, name
        self.trace_id, self.span_id, self.parent_id = trace_id, _new_id(8), parent_id
        self.kind, self.attrs, self.sampled = kind, dict(attrs or {}), sampled
        self.start_ns, self.error = time.time_ns(), None

    @property
    def traceparent(self):
        """This span as a W3C traceparent, to hand on to work it calls."""
        return "00-%s-%s-%s" % (self.trace_id, self.span_id, "01" if self.sampled else "00")

    def set_attribute(self, key, value):
        self.attrs[key] = value

    def end(self, error=None):
        if error is not None:
            self.error = error
        if self._tracer is not None and self.sampled:
            self._tracer.export(self, time.time_ns())

    def _otlp(self, end_ns):
        d = {"traceId": self.trace_id, "spanId": self.span_id, "name": self.name, "kind": self.kind,
             "startTimeUnixNano": str(self.start_ns), "endTimeUnixNano": str(end_ns), "attributes": _otlp_attrs(self.attrs)}
        if self.parent_id:
            d["parentSpanId"] = self.parent_id
        if self.error is not None:
            d["status"] = {"code": 2, "message": self.error}  # STATUS_CODE_ERROR
        return d


class _Tracer:
    """Sends spans to an OTLP/HTTP collector as JSON (POST …/v1/traces) from
    a thread of its own: the work never waits for it. The queue is bounded;
    spans past it, and batches the collector refuses, are dropped and
    logged."""

    def __init__(self, endpoint, headers, resource, log, delay=1.0, timeout=10.0):
        self.endpoint, self.headers, self.resource, self.log = endpoint, headers, resource, log
        self.delay, self.timeout = delay, timeout
        self.cv = threading.Condition()
        self.queue = deque()
        self.dropped = 0
        self.closed = False
        self.thread = threading.Thread(target=self._send_loop, name="ax-trace-sender", daemon=True)
        self.thread.start()

    @classmethod
    def from_env(cls, log, getenv=os.environ.get):
        """The tracer the environment asks for, as ax server reads it: an
        endpoint turns tracing on, OTEL_SDK_DISABLED=true or
        OTEL_TRACES_EXPORTER=none off; None when off."""
        traces, base = getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or "", getenv("OTEL_EXPORTER_OTLP_ENDPOINT") or ""
        if (not traces and not base) or (getenv("OTEL_SDK_DISABLED") or "").strip().lower() == "true" \
                or (getenv("OTEL_TRACES_EXPORTER") or "").strip().lower() == "none":
            return None
        endpoint = traces or base.rstrip("/") + "/v1/traces"
        headers = _otel_pairs(getenv("OTEL_EXPORTER_OTLP_HEADERS"))
        headers.update(_otel_pairs(getenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS")))
        resource = {"service.name": "ax-executor", "telemetry.sdk.language": "python", "telemetry.sdk.name": "ax_executor"}
        resource.update(_otel_pairs(getenv("OTEL_RESOURCE_ATTRIBUTES")))
        if getenv("OTEL_SERVICE_NAME"):
            resource["service.name"] = getenv("OTEL_SERVICE_NAME")
        try:
            delay = max(0.0, float(getenv("OTEL_BSP_SCHEDULE_DELAY") or 1000) / 1000)
        except ValueError:
            delay = 1.0
        return cls(endpoint, headers, resource, log, delay)

    def export(self, span, end_ns):
        with self.cv:
            if len(self.queue) >= TRACE_QUEUE:
                self.dropped += 1
                return
            self.queue.append(span._otlp(end_ns))
            if len(self.queue) >= TRACE_BATCH:
                self.cv.notify()

    def close(self, wait=5.0):
        """Sends what is queued, waiting at most wait seconds."""
        with self.cv:
            self.closed = True
            self.cv.notify()
        self.thread.join(wait)

    def _send_loop(self):
        while True:
            with self.cv:
                if not self.closed and len(self.queue) < TRACE_BATCH:
                    self.cv.wait(self.delay)
                batch = [self.queue.popleft() for _ in range(min(TRACE_BATCH, len(self.queue)))]
                dropped, self.dropped = self.dropped, 0
                closed = self.closed and not self.queue
            if dropped:
                self.log.warning("trace_spans_dropped", extra={"spans": dropped, "reason": "the export queue of %d spans was full" % TRACE_QUEUE})
            if batch:
                self._post(batch)
            if closed:
                return

    def _post(self, spans):
        body = {"resourceSpans": [{"resource": {"attributes": _otlp_attrs(self.resource)},
                                   "scopeSpans": [{"scope": {"name": "ax_executor", "version": str(PROTOCOL_VERSION)}, "spans": spans}]}]}
        headers = dict(self.headers)
        headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.endpoint, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                resp.read(1 << 16)
        except urllib.error.HTTPError as e:
            self.log.warning("trace_export_failed", extra={"endpoint": self.endpoint, "spans": len(spans),
                                                           "err": "HTTP %d: %s" % (e.code, e.read(512).decode("utf-8", "replace"))})
        except Exception as e:
            self.log.warning("trace_export_failed", extra={"endpoint": self.endpoint, "spans": len(spans), "err": str(e)})


class _SpanScope:
    def __init__(self, ctx, name, attrs):
        self.ctx, self.name, self.attrs = ctx, name, attrs

    def __enter__(self):
        parent = self.ctx._current_span()
        self.span = Span(self.ctx._tracer, self.name, parent.trace_id, parent.span_id, attrs=self.attrs, sampled=parent.sampled)
        self.ctx._spans.stack = self.ctx._stack() + [self.span]
        return self.span

    def __exit__(self, etype, e, tb):
        self.ctx._spans.stack = self.ctx._stack()[:-1]
        self.span.end(None if etype is None else ("%s: %s" % (etype.__name__, e) if str(e) else etype.__name__))
        return False


# --- a handler's view of its attempt ----------------------------------------------

class Context:
    """What a task function is given: its attempt, and the means to log,
    report outputs and notice a kill or its deadline."""

    def __init__(self, job, out, executor_log):
        d = job.d
        self.ticket = d["ticket"]
        self.task = d["task"]
        self.pipeline = d.get("pipeline", "")
        self.instance_id = d.get("instance_id", 0)
        self.logical_time = d.get("logical_time")
        self.deadline = d.get("deadline")
        self.params = dict(d.get("params") or {})
        self.env = dict(d.get("env") or {})
        self.secret_env = list(d.get("secret_env") or [])
        tp = d.get("traceparent")
        self.traceparent = tp if _parse_traceparent(tp) else None  # the dispatch's W3C traceparent, when valid
        self._tracer = job.tracer
        self._spans = threading.local()
        self.outputs = {}  # what ctx.output recorded: strings by key
        self._outputs_size = 0
        self._outputs_refused = None  # the first refusal: the attempt fails with it
        self._job = job
        self._out = out
        log = logging.Logger("ax_executor.task.%s" % self.task)  # its own, never in logging's registry
        log.addHandler(_OutputHandler(out))
        log.setLevel(logging.DEBUG)
        log.propagate = False
        self.log = log  # its lines go back with the result: `ax logs` shows them
        self._executor_log = executor_log

    @property
    def cancelled(self):
        """True once the work should stop: killed, past its deadline, or its
        synchronous caller hung up."""
        return self._job.stopped()

    def wait(self, seconds):
        """Sleeps up to seconds; returns True (at once) when the work is
        cancelled meanwhile, False when the time passed."""
        return self._job.wait(seconds)

    def span(self, name, **attrs):
        """A child span of the attempt's (or of the span open around it in
        this thread): `with ctx.span("load") as s: …`. An exception that
        leaves it marks it failed. Exported only when tracing is on."""
        return _SpanScope(self, name, attrs)

    def _stack(self):
        return getattr(self._spans, "stack", [])

    def _current_span(self):
        stack = self._stack()
        return stack[-1] if stack else self._job.span

    def output(self, key, value):
        """Gives the attempt's downstream an output, read by its templates as
        {{ .Upstream.TASK.KEY }}: a string as it is, any other value as its
        JSON. A key given twice keeps the last value. A key that is not a
        name, a value that is not text, or outputs over 64 KiB in all raise
        OutputRefused here, and the attempt fails with that message."""
        if not isinstance(value, str):
            value = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        msg = _check_output(key, value)
        if msg is None:
            size = self._outputs_size + len(key.encode()) + len(value.encode())
            if key in self.outputs:
                size -= len(key.encode()) + len(self.outputs[key].encode())
            if size > MAX_OUTPUTS:
                msg = _outputs_too_large(size)
            else:
                self.outputs[key], self._outputs_size = value, size
        if msg is not None:
            if self._outputs_refused is None:
                self._outputs_refused = msg
            raise OutputRefused(msg)


# --- jobs ----------------------------------------------------------------------

class _Job:
    def __init__(self, d, expires):
        self.d = d
        self.expires = expires  # unix seconds
        self.done = threading.Event()
        self.report = None
        self.jstate = ""
        self._stop = threading.Event()
        self.cause = None  # "killed" or "hung up"
        self.tracer = None
        self.span = None  # the attempt's span, while it runs

    def cancel(self, cause):
        if self.cause is None:
            self.cause = cause
        self._stop.set()

    def past_deadline(self):
        dl = self.d.get("deadline")
        return dl is not None and datetime.now(timezone.utc) >= dl

    def stopped(self):
        return self._stop.is_set() or self.past_deadline()

    def wait(self, seconds):
        end = time.monotonic() + max(0.0, seconds)
        while True:
            if self.stopped():
                return True
            left = end - time.monotonic()
            if left <= 0:
                return False
            dl = self.d.get("deadline")
            if dl is not None:
                left = min(left, max(0.0, (dl - datetime.now(timezone.utc)).total_seconds()) + 0.001)
            self._stop.wait(left)


# --- the journal ------------------------------------------------------------------

class _Journal:
    """The ticket journal of a state dir, line for line the Go SDK's
    (tickets.jsonl, boot, lock): accepted (with the dispatch), started, done
    (with the report), acked."""

    def __init__(self, path, now, log=None):
        os.makedirs(path, mode=0o700, exist_ok=True)
        self.dir = path
        self.mu = threading.Lock()
        self.appends = 0
        self.f = None
        self.log = log or _default_logger()
        # Both the directory and its lock file are locked, each on a
        # descriptor held open while the executor lives: the file is what a
        # Go executor locks, and the directory cannot be deleted and made
        # anew under a running executor as its lock file can.
        self.dirfd = os.open(path, os.O_RDONLY)
        self.lock = None
        try:
            fcntl.flock(self.dirfd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.lock = open(os.path.join(path, "lock"), "a+")
            os.chmod(self.lock.name, 0o600)
            fcntl.flock(self.lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            self._unlock()
            raise RuntimeError("executor: state dir %s is in use by another executor process (%s): give each executor its own" % (path, e))
        try:
            self.boot = self._read_boot()
            tickets = self._read(now)
            live = [t for t in tickets if not (t["state"] in ("done", "acked") and now > t["expires"])]
            self._rewrite(_jentries(live))
        except Exception:
            self._unlock()
            raise
        self.restored = live

    def _unlock(self):
        if self.lock is not None:
            self.lock.close()
            self.lock = None
        if self.dirfd is not None:
            os.close(self.dirfd)
            self.dirfd = None

    def _read_boot(self):
        p = os.path.join(self.dir, "boot")
        try:
            with open(p) as f:
                b = f.read().strip()
            if b:
                return b
        except FileNotFoundError:
            pass
        b = binascii.hexlify(os.urandom(8)).decode()
        _write_synced(self.dir, "boot", (b + "\n").encode())
        return b

    def _read(self, now):
        """The tickets of the journal, in the order they were accepted. A
        line that cannot be read (a torn last line is what a kill inside a
        write leaves) is logged with its number and skipped; a ticket whose
        accepted line was lost but that has a later line is known all the
        same, as started: it is reported interrupted and never runs again."""
        by, order = {}, []
        name = os.path.join(self.dir, "tickets.jsonl")
        try:
            f = open(name, "rb")
        except FileNotFoundError:
            return []
        with f:
            for n, line in enumerate(f, 1):
                try:
                    e = json.loads(line)
                    tk, st = e["t"], e["s"]
                    if not isinstance(tk, str) or not isinstance(st, str):
                        raise TypeError("ticket and state are not strings")
                    d = exp = None
                    if st == "accepted" and e.get("d") is not None:
                        d = _dispatch_from_json(e["d"])
                        exp = _parse_time(e.get("x", "0001-01-01T00:00:00Z"), "x")
                except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as err:
                    self.log.warning("journal_line_unreadable", extra={
                        "line": "%s:%d" % (name, n), "err": "%s: %s" % (type(err).__name__, err),
                        "rule": "skipped; a ticket with another line is reported interrupted, never run again"})
                    continue
                if not tk:
                    continue
                t = by.get(tk)
                if d is not None:
                    if t is None:
                        t = by[tk] = {}
                        order.append(t)
                    t.update(d=d, expires=exp.timestamp() if exp else 0.0, state="accepted", report=None)
                    continue
                if t is None:
                    self.log.warning("journal_ticket_without_dispatch", extra={"line": "%s:%d" % (name, n), "ticket": tk})
                    t = by[tk] = {"d": {"version": PROTOCOL_VERSION, "ticket": tk, "task": "", "logical_time": None, "deadline": None},
                                  "expires": now + DEFAULT_TICKET_TTL, "state": "started", "report": None}
                    order.append(t)
                if st == "started" and t["state"] == "accepted":
                    t["state"] = "started"
                elif st == "done" and e.get("r") is not None:
                    t["state"], t["report"] = "done", e["r"]
                elif st == "acked" and t["state"] == "done":
                    t["state"] = "acked"
        return order

    def _rewrite(self, lines):
        data = b"".join(json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in lines)
        _write_synced(self.dir, "tickets.jsonl", data)
        f = open(os.path.join(self.dir, "tickets.jsonl"), "ab")
        if self.f is not None:
            self.f.close()
        self.f, self.appends = f, 0

    def append(self, entry, sync, job=None):
        b = json.dumps(entry, separators=(",", ":")).encode() + b"\n"
        with self.mu:
            if self.f is None:
                raise RuntimeError("the ticket journal is closed")
            self.f.write(b)
            self.f.flush()
            if sync:
                os.fsync(self.f.fileno())
            self.appends += 1
            if job is not None:
                job.jstate = entry["s"]

    def compact(self, jobs):
        with self.mu:
            if self.f is None or self.appends < 4 * len(jobs) + 1024:
                return
            ts = []
            for j in jobs.values():
                if not j.jstate:
                    continue
                ts.append({"d": j.d, "expires": j.expires, "state": j.jstate,
                           "report": j.report if j.jstate in ("done", "acked") else None})
            self._rewrite(_jentries(ts))

    def close(self):
        with self.mu:
            if self.f is not None:
                self.f.close()
                self.f = None
            self._unlock()


def _jentries(ts):
    out = []
    for t in ts:
        tk = t["d"]["ticket"]
        out.append({"t": tk, "s": "accepted", "d": _dispatch_json(t["d"]),
                    "x": _fmt_time(datetime.fromtimestamp(t["expires"], timezone.utc))})
        if t["state"] == "started":
            out.append({"t": tk, "s": "started"})
        elif t["state"] in ("done", "acked"):
            out.append({"t": tk, "s": "done", "r": t["report"]})
            if t["state"] == "acked":
                out.append({"t": tk, "s": "acked"})
    return out


def _write_synced(d, name, data):
    fd, tmp = tempfile.mkstemp(prefix=name + ".", suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, os.path.join(d, name))
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    dfd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def read_token_file(path):
    """Reads ax server's executor credential file, by the server's rule: one
    line, readable and writable by its owner only."""
    st = os.stat(path)
    if not (st.st_mode & 0o170000 == 0o100000):
        raise RuntimeError("executor credential %s is not a regular file: give a file, or set AX_EXECUTOR_TOKEN" % path)
    if st.st_mode & 0o077:
        raise RuntimeError("executor credential %s has mode %o: others may read it; run chmod 600 %s" % (path, st.st_mode & 0o777, path))
    with open(path) as f:
        tok = f.read().strip()
    if not tok or any(c in tok for c in " \t\r\n"):
        raise RuntimeError("executor credential %s holds no token (one line, no spaces): remove it to have ax server make a new one, or write one" % path)
    return tok


# --- the executor -------------------------------------------------------------------

class Executor:
    """Runs registered task functions for ax schedulers (protocol v1).

    address     the base URL schedulers reach this executor at (required to
                register), such as http://10.0.0.5:9091
    schedulers  base URLs of the ax servers sharing one store (a primary and
                its standbys): registrations, heartbeats and results go to
                whichever answers, following a "primary" hint
    token       the executor credential (AX_EXECUTOR_TOKEN); token_file the
                server's file of it, read when first needed. Either way it
                is sent only to scheduler URLs and required on every
                dispatch, kill and status query
    state_dir   a directory of this executor's own for its ticket journal
    core, max, queue  the pool: core workers always, at most max, queue
                dispatches waiting (defaults 2 × CPUs, 2 × core, 300)
    heartbeat   seconds between heartbeats (10)
    logger      a logging.Logger for the executor's own events
    grace       seconds a stop (SIGTERM) waits for accepted work to end and
                its results to be delivered before the process exits (30);
                what is left then is reported interrupted at the next start
    """

    def __init__(self, address="", schedulers=(), token="", token_file="", state_dir="",
                 core=0, max=0, queue=0, heartbeat=10.0, logger=None, timeout=10.0, grace=30.0):
        self.core = core or 2 * (os.cpu_count() or 1)
        self.max = max or 2 * self.core
        self.queue_cap = queue or 300
        if self.core < 1 or self.max < self.core:
            raise ValueError("executor: core %d and max %d: want 1 <= core <= max" % (self.core, self.max))
        if self.queue_cap < 1:
            raise ValueError("executor: queue %d: want at least 1" % self.queue_cap)
        if isinstance(schedulers, str):
            schedulers = [s for s in schedulers.split(",")]
        self.scheds = []
        for u in schedulers:
            u = u.strip().rstrip("/")
            if u and u not in self.scheds:
                if not (u.startswith("http://") or u.startswith("https://")):
                    raise ValueError("executor: scheduler URL %r: give a base URL such as http://10.0.0.5:8080" % u)
                self.scheds.append(u)
        if self.scheds and not address:
            raise ValueError("executor: address is required to register with the scheduler")
        self.address = address.rstrip("/")
        self.heartbeat = heartbeat
        self.timeout = timeout
        self.grace = grace
        self.log = logger or _default_logger()
        self.tracer = _Tracer.from_env(self.log)  # spans of attempts, when the environment names a collector
        self._token, self._token_file = token, token_file
        self._state_dir = state_dir
        self.funcs = {}
        self.mu = threading.Lock()
        self.work_cv = threading.Condition(self.mu)
        self.queue = deque()
        self.workers = 0
        self.active = 0
        self.refused = {"pool_full": 0, "task_running": 0, "shutting_down": 0}
        self.tickets = {}
        self.running = {}
        self.outbox = deque()
        self.outbox_cv = threading.Condition(threading.Lock())
        self.prefer = ""
        self.boot = binascii.hexlify(os.urandom(8)).decode()
        self.jr = None
        self._stopped = threading.Event()  # new work is refused
        self._closing = threading.Event()  # the drain is over: deliveries end
        self._delivering = 0
        self._started = False

    # -- registration of functions

    def task(self, name):
        """Decorator: serve fn(ctx) as the task called name in the pipeline."""
        def register(fn):
            if self._started:
                raise RuntimeError("executor: task %r registered after the executor started" % name)
            self.funcs[name] = fn
            return fn
        return register

    def tasks(self):
        return sorted(self.funcs)

    # -- lifecycle

    def start(self):
        """Opens the state dir and takes up the tickets it holds. serve() and
        run() call it; call it yourself to serve the handler another way."""
        if self._started:
            return
        if not self.funcs:
            raise ValueError("executor: no task functions")
        self._started = True
        restored = []
        if self._state_dir:
            self.jr = _Journal(self._state_dir, time.time(), self.log)
            self.boot = self.jr.boot
            restored = self.jr.restored
        self._restore(restored)

    def _restore(self, ts):
        with self.mu:
            for t in ts:
                d = t["d"]
                if t["state"] == "accepted" and len(self.queue) < self.queue_cap and d["task"] not in self.running:
                    j = _Job(d, t["expires"])
                    j.jstate = "accepted"
                    self._enqueue(j)
                    self.log.info("ticket_requeued", extra={"task": d["task"], "ticket": d["ticket"]})
                    continue
                j = _Job(d, t["expires"])
                j.jstate = t["state"]
                self.tickets[d["ticket"]] = j
                if t["state"] in ("done", "acked"):
                    j.report = t["report"]
                else:
                    err = INTERRUPTED
                    if t["state"] == "accepted":
                        err = "the executor restarted with more accepted work than its queue holds: this work never started"
                    j.report = _report(d, "failed", err, 0)
                    self.jr.append({"t": d["ticket"], "s": "done", "r": j.report}, True, j)
                    self.log.warning("ticket_interrupted", extra={"task": d["task"], "ticket": d["ticket"]})
                j.done.set()
                if j.jstate == "done" and d.get("callback"):
                    self._post_later(j)

    def serve(self, listen, install_signals=True):
        """Serves listen (host:port) and registers with the schedulers until
        SIGINT or SIGTERM (or stop()); then refuses new work (503), lets the
        accepted work end and its results be delivered, for up to grace
        seconds, and closes the state dir."""
        self.start()
        host, port = listen.rsplit(":", 1)
        srv = _Server((host.strip("[]"), int(port)), _Handler)
        srv.executor = self
        if install_signals:
            for s in (signal.SIGINT, signal.SIGTERM):
                signal.signal(s, lambda *_: self.stop())
        t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
        t.start()
        self.log.info("executor_listening", extra={"listen": listen, "tasks": ",".join(self.tasks()), "boot": self.boot})
        try:
            self.run()
        finally:
            srv.shutdown()
            srv.server_close()
            self.close()

    def stop(self):
        self._stopped.set()
        with self.mu:
            self.work_cv.notify_all()
        with self.outbox_cv:
            self.outbox_cv.notify_all()

    def close(self):
        if self.jr is not None:
            self.jr.close()
        if self.tracer is not None:
            self.tracer.close()

    def run(self):
        """Registers, sends heartbeats and delivers results until stop();
        then drains (see serve)."""
        self.start()
        d = threading.Thread(target=self._deliver, daemon=True)
        d.start()
        try:
            self._register_loop()
        finally:
            self.stop()
            self._drain(time.monotonic() + self.grace)
            self._closing.set()
            with self.outbox_cv:
                self.outbox_cv.notify_all()
            d.join()

    def _drain(self, end):
        """Waits until end for the accepted work to end, then for its results
        to be delivered."""
        with self.mu:
            if self.running:
                self.log.info("executor_draining", extra={"work": len(self.running), "grace": "%gs" % self.grace})
            while (self.running or self.active) and time.monotonic() < end:  # active: a result not yet handed on
                self.work_cv.wait(end - time.monotonic())
            left = max(len(self.running), self.active)
        with self.outbox_cv:
            while (self.outbox or self._delivering) and time.monotonic() < end:
                self.outbox_cv.wait(end - time.monotonic())
            undelivered = len(self.outbox) + self._delivering
        if left or undelivered:
            self.log.warning("executor_drain_cut", extra={"grace": "%gs" % self.grace, "work_left": left, "results_left": undelivered,
                                                          "rule": "work left is reported interrupted, results left are delivered at the next start"})

    def _until_stopped(self, seconds):
        """Waits up to seconds for stop(); True once stopped. It wakes at
        least every half second: a signal the kernel hands to another
        thread runs its handler only when the main thread wakes."""
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if self._stopped.wait(min(max(left, 0.0), 0.5)):
                return True
            if left <= 0.5:
                return False

    def _register_loop(self):
        if not self.scheds:
            while not self._until_stopped(3600):
                pass
            return
        registered, retry, wait = False, 1.0, 0.0
        while not self._until_stopped(wait):
            if registered:
                path, body = "/api/v1/executors/heartbeat", {"address": self.address, "pool": self.pool()}
            else:
                path, body = "/api/v1/executors/register", {"address": self.address, "protocol": "http", "tasks": self.tasks(), "boot": self.boot}
            code, err, answer = self._to_scheduler(path, body, with_answer=True)
            failed = err is not None or code // 100 == 5
            if failed:
                self.log.warning("scheduler_unreachable", extra={"path": path, "code": code, "err": str(err)})
            elif code == 404 and registered:  # the scheduler forgot us: register again
                registered, wait = False, 0.0
                continue
            elif code // 100 == 2:
                registered = True
            else:
                self.log.error("scheduler_refused", extra={"path": path, "code": code, "answer": answer[:500].decode("utf-8", "replace")})
            if registered and not failed:
                retry, wait = 1.0, self.heartbeat
                continue
            wait = min(retry, self.heartbeat)
            retry = min(retry * 2, self.heartbeat)

    # -- the pool

    def pool(self):
        """The pool's figures, as the heartbeat and /metrics report them."""
        with self.mu:
            return {"workers": self.workers, "active": self.active, "max": self.max, "queued": len(self.queue),
                    "queue": self.queue_cap, "refused": sum(self.refused.values())}

    def _admit(self, d):
        """Finds the ticket's earlier job or queues a new one; raises _Refusal."""
        with self.mu:
            now = time.time()
            self._expire(now)
            j = self.tickets.get(d["ticket"])
            if j is not None:
                return j, True
            if self._stopped.is_set():
                self.refused["shutting_down"] += 1
                raise _Refusal(503, "this executor is shutting down")
            r = self.running.get(d["task"])
            if r is not None:
                self.refused["task_running"] += 1
                raise _Refusal(409, "task %s is already running here (ticket %s): refused to avoid re-entry" % (d["task"], r.d["ticket"]))
            if len(self.queue) >= self.queue_cap:
                self.refused["pool_full"] += 1
                raise _Refusal(503, "worker pool full (%d workers busy, %d of %d queued): try another executor or later"
                               % (self.workers, len(self.queue), self.queue_cap))
            ttl = (d.get("ticket_ttl_ms") or 0) / 1000.0
            j = _Job(d, now + (ttl if ttl > 0 else DEFAULT_TICKET_TTL))
            if self.jr is not None:
                try:  # durable before the scheduler hears it was accepted
                    self.jr.append({"t": d["ticket"], "s": "accepted", "d": _dispatch_json(d),
                                    "x": _fmt_time(datetime.fromtimestamp(j.expires, timezone.utc))}, True, j)
                except Exception as e:
                    self.log.error("journal_failed", extra={"ticket": d["ticket"], "err": str(e)})
                    raise _Refusal(503, "cannot record the ticket in the state dir (%s): try another executor or later" % e)
            self._enqueue(j)
            return j, False

    def _enqueue(self, j):  # with mu held, room in the queue
        self.queue.append(j)
        self.tickets[j.d["ticket"]] = j
        self.running[j.d["task"]] = j
        if self.workers < self.core or (self.queue and self.workers < self.max):
            self.workers += 1
            threading.Thread(target=self._work, daemon=True).start()
        self.work_cv.notify()

    def _expire(self, now):  # with mu held
        for t, j in list(self.tickets.items()):
            if j.done.is_set() and now > j.expires:
                del self.tickets[t]
        if self.jr is not None:
            try:
                self.jr.compact(self.tickets)
            except Exception as e:
                self.log.error("journal_compact_failed", extra={"dir": self._state_dir, "err": str(e)})

    def _work(self):
        """Runs queued jobs; a worker beyond core leaves after a minute idle."""
        while True:
            with self.mu:
                idle_since = time.monotonic()
                while not self.queue:
                    if self._stopped.is_set():
                        self.workers -= 1
                        return
                    if self.workers > self.core and time.monotonic() - idle_since >= 60:
                        self.workers -= 1
                        return
                    self.work_cv.wait(1.0)
                j = self.queue.popleft()
                self.active += 1
            try:
                self._run(j)
            finally:
                with self.mu:
                    self.active -= 1
                    self.work_cv.notify_all()  # a drain waits for the running work

    def _run(self, j):
        d = j.d
        start = time.monotonic()
        out = _Output([v for k, v in (d.get("env") or {}).items() if k in (d.get("secret_env") or [])])
        # Work killed, or past its deadline, before a worker took it never
        # starts: the scheduler has already failed that attempt.
        started = not j.stopped()
        err, permanent = None, False
        ctx = None
        j.tracer, j.span = self.tracer, self._attempt_span(d)
        abandoned = False
        if started:
            try:
                if self.jr is not None:  # durable before the work can have any effect
                    self.jr.append({"t": d["ticket"], "s": "started"}, True, j)
                ctx = Context(j, out, self.log)
                err, permanent, abandoned = self._call(j, self.funcs[d["task"]], ctx)
            except Exception as e:  # the journal failed: the work never ran
                err = "%s: %s" % (type(e).__name__, e) if str(e) else type(e).__name__
        status, error = "success", ""
        if abandoned:
            self.log.error("task_abandoned", extra={"task": d["task"], "ticket": d["ticket"], "cause": j.cause or "deadline exceeded"})
        if j.cause == "killed":
            status, error, permanent = "failed", "killed", False
        elif j.cause == "hung up":
            status, error, permanent = "failed", "stopped: the scheduler hung up before the result (synchronous form)", False
        elif j.past_deadline():
            status, error, permanent = "failed", "deadline exceeded", False
        elif err is not None:
            status, error = "failed", err
        elif ctx is not None and ctx._outputs_refused is not None:
            status, error = "failed", ctx._outputs_refused
        if not started:
            error += " before the work started: it never ran"
        rep = _report(d, status, out.mask(error), int((time.monotonic() - start) * 1000))
        if permanent:
            rep["permanent"] = True
        data, dropped = out.take()
        if data:
            rep["log"] = base64.b64encode(data).decode()
        if dropped:
            rep["log_dropped"] = dropped
        if status == "success" and ctx is not None and ctx.outputs:
            rep["outputs"] = {k: out.mask(v) for k, v in ctx.outputs.items()}  # a secret's value never leaves
        if ctx is not None:
            ctx.log.handlers[:] = []
        j.span.set_attribute("ax.status", status)
        j.span.end(out.mask(error) if status != "success" else None)
        j.cancel(None)
        with self.mu:
            j.report = rep
            if self.running.get(d["task"]) is j:
                del self.running[d["task"]]
        if self.jr is not None:
            try:  # durable before anyone hears the result
                self.jr.append({"t": d["ticket"], "s": "done", "r": rep}, True, j)
            except Exception as e:
                self.log.error("journal_failed", extra={"ticket": d["ticket"], "err": str(e)})
        j.done.set()
        self.log.info("task_done", extra={"task": d["task"], "ticket": d["ticket"], "status": status})
        if d.get("callback"):
            self._post_later(j)

    def _attempt_span(self, d):
        """The attempt's span: a child of the dispatch's traceparent (a root
        of a trace of its own without one), exported when it ends."""
        parsed = _parse_traceparent(d.get("traceparent"))
        tid, parent, sampled = parsed if parsed else (_new_id(16), "", True)
        task = "%s.%s" % (d["pipeline"], d["task"]) if d.get("pipeline") else d["task"]  # as the server's spans name it
        attrs = {"ax.pipeline": d.get("pipeline", ""), "ax.task": task, "ax.ticket": d["ticket"]}
        if d.get("instance_id"):
            attrs["ax.instance_id"] = d["instance_id"]
        return Span(self.tracer, "execute " + d["task"], tid, parent, kind=2, attrs=attrs, sampled=sampled)  # SPAN_KIND_SERVER

    def _call(self, j, fn, ctx):
        """Runs fn(ctx) in a thread of its own (a coroutine function under
        asyncio.run) and waits for it, or for a kill, a hang-up or the
        deadline: then the attempt ends at once, and a handler that has not
        returned is abandoned (Python cannot stop a thread), its late return
        ignored. It returns (error or None, permanent, abandoned); any
        exception of the handler, SystemExit and KeyboardInterrupt too,
        fails the attempt with the exception's name."""
        box = {}
        finished = threading.Event()

        def call():
            try:
                r = fn(ctx)
                if inspect.isawaitable(r):
                    r = asyncio.run(_awaited(r))
            except Permanent as e:
                box["err"], box["permanent"] = str(e) or "permanent failure", True
            except OutputRefused as e:  # the rule's own words, as the Go SDK's
                box["err"] = str(e)
            except BaseException as e:
                box["err"] = "%s: %s" % (type(e).__name__, e) if str(e) else type(e).__name__
                try:
                    ctx.log.error("task_raised", exc_info=True)
                except Exception:
                    pass
            finally:
                finished.set()

        threading.Thread(target=call, name="ax-task-%s" % j.d["task"], daemon=True).start()
        while not finished.is_set():
            if j.stopped():
                if not finished.wait(0.05):  # a handler that stops on its own has a moment to return
                    return None, False, True
                break
            left = 0.1
            dl = j.d.get("deadline")
            if dl is not None:
                left = min(left, max(0.0, (dl - datetime.now(timezone.utc)).total_seconds()) + 0.001)
            finished.wait(left)
        return box.get("err"), box.get("permanent", False), False

    # -- results

    def _post_later(self, j):
        with self.outbox_cv:
            self.outbox.append(j)
            self.outbox_cv.notify()

    def _deliver(self):
        """Posts results to their callbacks until acknowledged (2xx) or
        rejected as malformed (4xx), retrying with backoff: at least once."""
        while True:
            with self.outbox_cv:
                while not self.outbox and not self._closing.is_set():
                    self.outbox_cv.wait()
                if self._closing.is_set():
                    return
                j = self.outbox.popleft()
                self._delivering += 1
            try:
                stopped = self._deliver_one(j)
            except Exception as e:  # one result that cannot be sent never stops the others
                stopped = False
                self.log.error("result_undeliverable", extra={"task": j.d.get("task", ""), "ticket": j.d.get("ticket", ""),
                                                              "callback": j.d.get("callback", ""), "err": "%s: %s" % (type(e).__name__, e)})
            with self.outbox_cv:
                self._delivering -= 1
                self.outbox_cv.notify_all()
            if stopped:
                return

    def _deliver_one(self, j):
        """Posts one result until acknowledged or rejected; True when the
        executor stopped meanwhile."""
        if not _is_http_url(j.d["callback"]):  # only an old journal holds one: it can never be sent
            self.log.error("result_undeliverable", extra={"task": j.d["task"], "ticket": j.d["ticket"], "callback": j.d["callback"],
                                                          "err": "the callback is not an http(s) URL"})
            self._acked(j)
            return False
        wait = 0.1
        while True:
            code, err, _ = self._post(j.d["callback"], j.report)
            if (err is not None or code // 100 == 5) and self.scheds:
                # The server that dispatched it is gone or cannot store
                # it: any other server stores it for the primary.
                code, err = self._to_scheduler("/api/v1/results", j.report)
            if err is None and code // 100 in (2, 4):
                if code // 100 == 4:
                    self.log.error("result_rejected", extra={"task": j.d["task"], "ticket": j.d["ticket"], "code": code})
                self._acked(j)
                return False
            self.log.warning("result_not_delivered", extra={"task": j.d["task"], "ticket": j.d["ticket"], "code": code,
                                                            "err": str(err), "retry_in": "%.1fs" % wait})
            if self._closing.wait(wait):
                return True
            wait = min(2 * wait, 30.0)

    def _acked(self, j):
        if self.jr is not None:
            try:  # not synced: at worst a restart delivers it again, and the scheduler ignores it
                self.jr.append({"t": j.d["ticket"], "s": "acked"}, False, j)
            except Exception as e:
                self.log.warning("journal_failed", extra={"ticket": j.d["ticket"], "err": str(e)})

    # -- talking to schedulers

    def token(self):
        if self._token or not self._token_file:
            return self._token
        with self.mu:
            tok = read_token_file(self._token_file)
            self._token = tok
            return tok

    def _to_scheduler(self, path, body, with_answer=False):
        """POSTs body to path on the scheduler that answered last, then on the
        others, following a "primary" hint, until one answers below 500."""
        with self.mu:
            queue = ([self.prefer] if self.prefer else []) + list(self.scheds)
        tried, code, err = set(), 0, None
        while queue:
            base = queue.pop(0)
            if base in tried:
                continue
            tried.add(base)
            code, err, answer = self._post(base + path, body)
            if err is None and code // 100 != 5:
                with self.mu:
                    self.prefer = base
                return (code, None, answer) if with_answer else (code, None)
            try:
                hint = json.loads(answer or b"{}").get("primary", "")
            except (ValueError, AttributeError):
                hint = ""
            if isinstance(hint, str) and hint.startswith("http"):
                queue.insert(0, hint.rstrip("/"))  # a standby's "primary is at …"
        return (code, err, b"") if with_answer else (code, err)

    def _is_scheduler(self, url):
        return any(url.startswith(s + "/") for s in self.scheds)

    def _post(self, url, body):
        """POSTs body as JSON; returns (code, error, answer). The token goes
        only to scheduler URLs."""
        if not _is_http_url(url):
            return 0, ValueError("%r is not an http(s) URL" % url), b""
        headers = {"Content-Type": "application/json", "X-Ax-Protocol": str(PROTOCOL_VERSION)}
        if self._is_scheduler(url):
            try:
                tok = self.token()
            except Exception as e:
                return 0, e, b""
            if tok:
                headers["Authorization"] = "Bearer " + tok
        req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return resp.status, None, resp.read(1 << 16)
        except urllib.error.HTTPError as e:
            try:
                answer = e.read(1 << 16)
            except Exception:
                answer = b""
            return e.code, None, answer
        except Exception as e:
            return 0, e, b""

    # -- metrics

    def metrics(self):
        """The pool's figures in the Prometheus text format."""
        with self.mu:
            workers, active, queued = self.workers, self.active, len(self.queue)
            refused = dict(self.refused)
        lines = [
            "# HELP ax_executor_workers Worker threads of the pool (core are always there, up to max).",
            "# TYPE ax_executor_workers gauge",
            "ax_executor_workers %d" % workers,
            "# HELP ax_executor_workers_active Workers running a task now.",
            "# TYPE ax_executor_workers_active gauge",
            "ax_executor_workers_active %d" % active,
            "# HELP ax_executor_workers_max The most workers the pool starts.",
            "# TYPE ax_executor_workers_max gauge",
            "ax_executor_workers_max %d" % self.max,
            "# HELP ax_executor_queue_depth Dispatches waiting for a worker.",
            "# TYPE ax_executor_queue_depth gauge",
            "ax_executor_queue_depth %d" % queued,
            "# HELP ax_executor_queue_capacity Dispatches the queue holds; past it dispatches are refused.",
            "# TYPE ax_executor_queue_capacity gauge",
            "ax_executor_queue_capacity %d" % self.queue_cap,
            "# HELP ax_executor_refused_total Dispatches refused, by reason.",
            "# TYPE ax_executor_refused_total counter",
        ]
        for reason in sorted(refused):
            lines.append('ax_executor_refused_total{reason="%s"} %d' % (reason, refused[reason]))
        return "\n".join(lines) + "\n"


async def _awaited(aw):
    return await aw


def _report(d, status, error, duration_ms):
    rep = {"ticket": d["ticket"], "status": status, "duration_ms": duration_ms}
    if error:
        rep["error"] = error
    if d.get("instance_id"):
        rep["instance_id"] = d["instance_id"]
    return rep


# --- the HTTP side ---------------------------------------------------------------------

class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # A burst of dispatches waits to be accepted and is answered (503 when
    # the pool is full) rather than reset; the kernel caps it at somaxconn.
    request_queue_size = 1024

    def __init__(self, addr, handler):
        fam = socket.AF_INET6 if ":" in addr[0] else socket.AF_INET
        self.address_family = fam
        super().__init__(addr, handler)


def _is_http_url(u):
    try:
        p = urllib.parse.urlsplit(u)
    except ValueError:
        return False
    return p.scheme in ("http", "https") and bool(p.netloc)


def _is_loopback_host(h):
    h = h.strip("[]").lower()
    if h == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def _host_only(hp):
    if hp.startswith("["):
        return hp[1:].split("]", 1)[0]
    if hp.count(":") == 1:
        return hp.split(":", 1)[0]
    return hp


_SAFE_METHODS = ("GET", "HEAD", "OPTIONS")  # no body to check: the door lets them by without a JSON type


class _Handler(BaseHTTPRequestHandler):
    """POST /dispatch, /kill, /status; GET /healthz, /metrics. It keeps the
    rules of ax's door: on a loopback listener only loopback or the listen
    address as Host, no foreign Origin, and JSON bodies on POST."""

    protocol_version = "HTTP/1.1"
    server_version = "ax-executor-python"
    timeout = 10  # a client that trickles its request is cut off

    def log_message(self, fmt, *args):  # the executor logs its own events
        pass

    @property
    def x(self):
        return self.server.executor

    def _send(self, code, obj, ctype="application/json", headers=()):
        if self.close_connection:
            self._drain()
        body = obj if isinstance(obj, bytes) else (json.dumps(obj) + "\n").encode()
        self.send_response(code)
        if self.close_connection:
            self.send_header("Connection", "close")
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _refuse(self, code, reason):
        self._send(code, {"accepted": False, "reason": reason})

    def _door_refuse(self, code, msg):
        self._send(code, {"error": msg})

    def _door(self, mutating):
        listen = self.x.address.split("://", 1)[-1].split("/", 1)[0]
        host = self.headers.get("Host", "")
        if _is_loopback_host(_host_only(listen)):
            allowed = {listen.lower(), _host_only(listen).lower()}
            if not (host.lower() in allowed or _host_only(host).lower() in allowed or _is_loopback_host(_host_only(host))):
                self._door_refuse(403, "Host %s is not a name of this server (it listens on loopback %s): refused against DNS rebinding; call it as http://%s"
                                  % (json.dumps(host), listen, listen))
                return False
        origin = self.headers.get("Origin")
        if origin:
            u = urllib.parse.urlsplit(origin)
            if not u.netloc or u.scheme != "http" or (u.netloc.lower() != host.lower() and u.netloc.lower() != listen.lower()):
                self._door_refuse(403, "Origin %s is foreign: a web page of another site cannot call this executor; its scheduler calls it with no Origin header" % json.dumps(origin))
                return False
        if mutating:
            ct = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
            if ct != "application/json":
                self._door_refuse(415, "%s %s needs Content-Type: application/json (got %s): send a JSON body, {} when there is nothing to say"
                                  % (self.command, self.path, json.dumps(self.headers.get("Content-Type") or "")))
                return False
        return True

    # The routes and their methods, as the Go SDK's mux has them: another
    # method on a route is answered 405 with Allow; HEAD is GET's.
    _ROUTES = {"/dispatch": ("POST",), "/kill": ("POST",), "/status": ("POST",),
               "/healthz": ("GET", "HEAD"), "/metrics": ("GET", "HEAD")}

    def _serve(self):
        # A request refused before its body is read leaves the body on the
        # connection: it is closed after the answer rather than read as the
        # next request (unless it is drained first).
        self.close_connection = True
        if not self._door(self.command not in _SAFE_METHODS):
            return
        allowed = self._ROUTES.get(self.path)
        if allowed is None:
            self._send(404, b"404 page not found\n", "text/plain; charset=utf-8")
        elif self.command not in allowed:
            self._send(405, b"Method Not Allowed\n", "text/plain; charset=utf-8", [("Allow", ", ".join(allowed))])
        elif self.path == "/healthz":
            self._send(200, b"ok\n", "text/plain; charset=utf-8")
        elif self.path == "/metrics":
            self._send(200, self.x.metrics().encode(), "text/plain; version=0.0.4; charset=utf-8")
        elif self._authorized():
            {"/dispatch": self._dispatch, "/kill": self._kill, "/status": self._status}[self.path]()

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _serve

    def _authorized(self):
        try:
            tok = self.x.token()
        except Exception as e:
            self._refuse(503, "this executor cannot authenticate its scheduler yet (%s): try later" % e)
            return False
        if tok:
            got = self.headers.get("Authorization", "")
            if not (got.startswith("Bearer ") and hmac.compare_digest(got[7:].encode(), tok.encode())):
                self._refuse(401, "missing or wrong bearer token: the scheduler sends its AX_EXECUTOR_TOKEN")
                return False
        return True

    def _drain(self):
        """Reads and drops the body of a request refused before reading it
        (up to 8 MiB): the connection serves the next request, or, past
        that, closes without resetting the answer before it is read."""
        if self.headers.get("Transfer-Encoding"):
            return
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            return
        if n > 8 * MAX_DISPATCH:
            return
        while n > 0:
            chunk = self.rfile.read(min(n, 1 << 16))
            if not chunk:
                return
            n -= len(chunk)
        self.close_connection = False

    def _body(self):
        """The request's body, at most MAX_DISPATCH bytes; raises ValueError
        with Go's words for an oversized one."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                if len(data) + size > MAX_DISPATCH:
                    raise ValueError("http: request body too large")
                data += self.rfile.read(size)
                self.rfile.readline()
            self.close_connection = False
            return data
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_DISPATCH:
            raise ValueError("http: request body too large")  # never read: the connection closes
        data = self.rfile.read(n)
        self.close_connection = False
        return data

    def _json_body(self):
        raw = self._body()
        if not raw.strip():
            raise ValueError("EOF")
        return _loads(raw)

    def _dispatch(self):
        x = self.x
        try:
            raw = self._body()
            if not raw.strip():
                raise ValueError("EOF")
            d = _decode_dispatch(raw)
        except ValueError as e:
            self._refuse(400, "malformed dispatch: %s" % e)
            return
        if d.get("version") != PROTOCOL_VERSION:
            self._refuse(400, "protocol version %d: this executor speaks %d" % (d.get("version") or 0, PROTOCOL_VERSION))
            return
        if not d.get("ticket") or not d.get("task"):
            self._refuse(400, "malformed dispatch: ticket and task are required")
            return
        if d.get("callback") and not _is_http_url(d["callback"]):
            self._refuse(400, "malformed dispatch: callback %s is not an http:// or https:// URL: give the scheduler's result URL"
                         % json.dumps(d["callback"]))
            return
        if d["task"] not in x.funcs:
            self._refuse(404, "task %s is not served here (serving %s)" % (json.dumps(d["task"]), "[" + " ".join(x.tasks()) + "]"))
            return
        try:
            j, prior = x._admit(d)
        except _Refusal as r:
            self._refuse(r.code, r.reason)
            return
        if d.get("callback"):
            ans = {"accepted": True, "boot": x.boot}
            if prior and j.done.is_set():
                ans["result"] = j.report
            self._send(202, ans)
            return
        # The synchronous form: answer with the result; a caller that hangs
        # up first ended the attempt on its side, and the work stops.
        while not j.done.wait(0.1):
            if self._hung_up():
                if not prior:
                    j.cancel("hung up")
                return
        self._send(200, j.report)

    def _hung_up(self):
        try:
            r, _, _ = select.select([self.connection], [], [], 0)
            if not r:
                return False
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _kill(self):
        try:
            k = self._json_body()
            ok = isinstance(k, dict) and set(k) <= {"ticket"} and isinstance(k.get("ticket"), str) and k["ticket"]
        except ValueError:
            ok = False
        if not ok:
            self._refuse(400, 'malformed kill: want {"ticket": "…"}')
            return
        with self.x.mu:
            j = self.x.tickets.get(k["ticket"])
        if j is None:
            self._refuse(404, "ticket %s is not known here" % k["ticket"])
            return
        j.cancel("killed")
        self._send(200, {"accepted": True})

    def _status(self):
        x = self.x
        if not x.token() and not self._from_scheduler_addr():
            ip = self.client_address[0]
            x.log.warning("status_refused", extra={"from": "%s:%s" % self.client_address[:2], "reason": "not a configured scheduler"})
            self._refuse(403, "status query from %s, which is not a configured scheduler (%s): give the executor a token (AX_EXECUTOR_TOKEN) to authenticate the scheduler wherever it calls from"
                         % (ip, ", ".join(x.scheds)))
            return
        try:
            q = self._json_body()
            ok = (isinstance(q, dict) and set(q) <= {"tickets"} and isinstance(q.get("tickets"), list)
                  and q["tickets"] and all(isinstance(t, str) for t in q["tickets"]))
        except ValueError:
            ok = False
        if not ok:
            self._refuse(400, 'malformed status query: want {"tickets": ["…"]}')
            return
        if len(q["tickets"]) > MAX_STATUS_TICKETS:
            self._refuse(413, "status query for %d tickets: at most %d at once" % (len(q["tickets"]), MAX_STATUS_TICKETS))
            return
        ans = {}
        with x.mu:
            for t in q["tickets"]:
                j = x.tickets.get(t)
                if j is None:
                    ans[t] = {"state": "unknown"}
                elif j.done.is_set():
                    ans[t] = {"state": "done", "result": j.report}
                else:
                    ans[t] = {"state": "running"}
        self._send(200, {"boot": x.boot, "tickets": ans})

    def _from_scheduler_addr(self):
        try:
            ip = ipaddress.ip_address(self.client_address[0])
        except ValueError:
            return False
        if not self.x.scheds:
            return ip.is_loopback
        for s in self.x.scheds:
            h = urllib.parse.urlsplit(s).hostname or ""
            try:
                addrs = [ipaddress.ip_address(h)]
            except ValueError:
                try:
                    addrs = [ipaddress.ip_address(a[4][0]) for a in socket.getaddrinfo(h, None)]
                except OSError:
                    continue
            for a in addrs:
                if a == ip or (a.is_loopback and ip.is_loopback) or (a.is_unspecified and ip.is_loopback):
                    return True
        return False

"""The Python SDK keeps serving whatever a handler, a dispatch or its state
dir throws at it. Run: python3 -m unittest discover -s sdk/python/tests
(cmd/ax's TestPythonSDKRobust runs it)."""

import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import ax_executor  # noqa: E402


def wait_for(cond, what, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


def read(path):
    with open(path, "rb") as f:
        return f.read()


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)

    def messages(self):
        return [(r.getMessage(), {k: v for k, v in vars(r).items()}) for r in self.records]


class Callbacks:
    """An HTTP server that keeps the results posted to it."""

    def __init__(self):
        got = self.got = []

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                got.append(json.loads(self.rfile.read(n)))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = "http://127.0.0.1:%d/result" % self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def result(self, ticket):
        return wait_for(lambda: next((r for r in self.got if r.get("ticket") == ticket), None), "the result of " + ticket)

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


class Harness:
    """An executor serving on a free loopback port, run() in a thread."""

    def __init__(self, funcs, state_dir="", **kw):
        self.log = logging.Logger("test")
        self.rec = _Records()
        self.log.addHandler(self.rec)
        self.x = ax_executor.Executor(state_dir=state_dir, logger=self.log, core=2, max=4, **kw)
        for name, fn in funcs.items():
            self.x.task(name)(fn)
        self.x.start()
        self.srv = ax_executor._Server(("127.0.0.1", 0), ax_executor._Handler)
        self.srv.executor = self.x
        self.x.address = "http://127.0.0.1:%d" % self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self.runner = threading.Thread(target=self.x.run, daemon=True)
        self.runner.start()

    def post(self, path, body, headers=None):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        req = urllib.request.Request(self.x.address + path, data=data, headers=h, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=20) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def dispatch(self, task, ticket, **kw):
        d = {"version": 1, "task": task, "ticket": ticket}
        d.update(kw)
        return self.post("/dispatch", d)

    def close(self):
        self.x.stop()
        self.runner.join(10)
        self.srv.shutdown()
        self.srv.server_close()
        self.x.close()


def in_(seconds):
    return (datetime.now(timezone.utc) + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class TestDelivery(unittest.TestCase):
    def setUp(self):
        self.cb = Callbacks()
        self.h = Harness({"t": lambda ctx: None})

    def tearDown(self):
        self.h.close()
        self.cb.close()

    def test_non_http_callback_refused_and_delivery_goes_on(self):
        for bad in ("file:///etc/passwd", "data:,hello", "http://", "ftp://x/y"):
            code, ans = self.h.dispatch("t", "bad-" + bad, callback=bad)
            self.assertEqual(code, 400, ans)
            self.assertEqual(ans["reason"], "malformed dispatch: callback %s is not an http:// or https:// URL: give the scheduler's result URL"
                             % json.dumps(bad))
        self.assertEqual(self.h.x.tickets, {}, "a refused dispatch is never recorded")
        code, ans = self.h.dispatch("t", "good", callback=self.cb.url)
        self.assertEqual(code, 202, ans)
        self.assertEqual(self.cb.result("good")["status"], "success")


class TestPoisonedJournal(unittest.TestCase):
    def test_a_bad_callback_in_the_journal_does_not_stop_delivery(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        cb = Callbacks()
        self.addCleanup(cb.close)
        x = in_(600)
        lines = []
        for tk, url in (("poison", "data:,hello"), ("poison2", "file:///etc/passwd"), ("fine", cb.url)):
            lines.append({"t": tk, "s": "accepted", "d": {"version": 1, "task": "t", "ticket": tk, "callback": url}, "x": x})
            lines.append({"t": tk, "s": "done", "r": {"ticket": tk, "status": "success", "duration_ms": 1}})
        with open(os.path.join(d, "tickets.jsonl"), "w") as f:
            f.write("".join(json.dumps(e) + "\n" for e in lines))
        h = Harness({"t": lambda ctx: None}, state_dir=d)
        self.addCleanup(h.close)
        self.assertEqual(cb.result("fine")["status"], "success")
        code, ans = h.dispatch("t", "later", callback=cb.url)
        self.assertEqual(code, 202, ans)
        self.assertEqual(cb.result("later")["status"], "success")
        self.assertIn("result_undeliverable", [m for m, _ in h.rec.messages()])


class TestHandlers(unittest.TestCase):
    def setUp(self):
        self.release = threading.Event()
        self.cb = Callbacks()
        self.ran = []

        def exits(ctx):
            sys.exit(3)

        def interrupts(ctx):
            raise KeyboardInterrupt()

        async def coro(ctx):
            import asyncio
            await asyncio.sleep(0)
            self.ran.append(ctx.ticket)

        async def coro_fails(ctx):
            raise ValueError("async boom")

        def blocks(ctx):
            self.release.wait()

        self.h = Harness({"exits": exits, "interrupts": interrupts, "coro": coro, "coro_fails": coro_fails,
                          "blocks": blocks, "ok": lambda ctx: None})

    def tearDown(self):
        self.release.set()
        self.h.close()
        self.cb.close()

    def test_base_exceptions_fail_the_attempt_and_the_worker_survives(self):
        for task, want in (("exits", "SystemExit: 3"), ("interrupts", "KeyboardInterrupt")):
            for i in range(6):  # more than the pool's workers
                code, rep = self.h.dispatch(task, "%s-%d" % (task, i))
                self.assertEqual(code, 200, rep)
                self.assertEqual((rep["status"], rep["error"]), ("failed", want))
        code, rep = self.h.dispatch("ok", "after")
        self.assertEqual((code, rep["status"]), (200, "success"))
        self.assertEqual(self.h.x.pool()["active"], 0)

    def test_async_handlers_run(self):
        code, rep = self.h.dispatch("coro", "c1")
        self.assertEqual((code, rep["status"]), (200, "success"), rep)
        self.assertEqual(self.ran, ["c1"])
        code, rep = self.h.dispatch("coro_fails", "c2")
        self.assertEqual((rep["status"], rep["error"]), ("failed", "ValueError: async boom"))

    def test_a_blocked_handler_is_reported_at_its_deadline_and_frees_its_task(self):
        t0 = time.monotonic()
        code, rep = self.h.dispatch("blocks", "b1", deadline=in_(0.5))
        self.assertEqual((code, rep["status"], rep["error"]), (200, "failed", "deadline exceeded"), rep)
        self.assertLess(time.monotonic() - t0, 5)
        code, rep = self.h.dispatch("blocks", "b2", callback=self.cb.url)
        self.assertEqual(code, 202, rep)  # not 409: the slot is free

    def test_a_kill_of_a_handler_that_ignores_it_is_reported_at_once(self):
        code, rep = self.h.dispatch("blocks", "k1", callback=self.cb.url)
        self.assertEqual(code, 202, rep)
        wait_for(lambda: self.h.x.pool()["active"] == 1, "the handler to run")
        code, ans = self.h.post("/kill", {"ticket": "k1"})
        self.assertEqual(code, 200, ans)
        r = self.cb.result("k1")
        self.assertEqual((r["status"], r["error"]), ("failed", "killed"))
        code, rep = self.h.dispatch("blocks", "k2", callback=self.cb.url)
        self.assertEqual(code, 202, rep)
        self.release.set()  # the abandoned k1 returns late: its return is ignored
        self.assertEqual(self.cb.result("k2")["status"], "success")
        self.assertEqual([r["status"] for r in self.cb.got if r["ticket"] == "k1"], ["failed"])


_DRAIN_SCRIPT = r"""
import os, sys, time
sys.path.insert(0, sys.argv[1])
import ax_executor
release = sys.argv[3]
x = ax_executor.Executor(address="http://127.0.0.1:" + sys.argv[2], state_dir=sys.argv[4], core=1, max=2)

@x.task("slow")
def slow(ctx):
    while not os.path.exists(release):
        time.sleep(0.01)

@x.task("other")
def other(ctx):
    pass

x.serve("127.0.0.1:" + sys.argv[2])
"""


class TestDrain(unittest.TestCase):
    def test_sigterm_lets_running_work_end_and_delivers_its_result(self):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        cb = Callbacks()
        self.addCleanup(cb.close)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        release = os.path.join(d, "release")
        state = os.path.join(d, "state")
        sdk = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
        p = subprocess.Popen([sys.executable, "-c", _DRAIN_SCRIPT, sdk, str(port), release, state],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.addCleanup(lambda: p.poll() is None and p.kill())
        base = "http://127.0.0.1:%d" % port

        def post(path, body):
            req = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=10) as r:
                    return r.status, json.loads(r.read())
            except urllib.error.HTTPError as e:
                return e.code, json.loads(e.read())
            except OSError:
                return 0, None

        def dispatch(task, ticket):
            return post("/dispatch", {"version": 1, "task": task, "ticket": ticket, "callback": cb.url})

        self.assertEqual(wait_for(lambda: dispatch("slow", "s1")[0], "the executor to listen"), 202)
        wait_for(lambda: post("/status", {"tickets": ["s1"]})[1]["tickets"]["s1"]["state"] == "running", "s1 to run")
        p.send_signal(signal.SIGTERM)
        n = [0]

        def refused():
            n[0] += 1
            return dispatch("other", "o%d" % n[0])

        code, ans = wait_for(lambda: (lambda r: r if r[0] == 503 else None)(refused()), "dispatches to be refused")
        self.assertEqual(ans["reason"], "this executor is shutting down")
        self.assertIsNone(p.poll(), "the executor exited with its work running")
        with open(release, "w"):
            pass
        out, _ = p.communicate(timeout=20)
        self.assertEqual(cb.result("s1")["status"], "success", out)
        self.assertEqual(p.returncode, 0, out)
        with open(os.path.join(state, "tickets.jsonl")) as f:
            self.assertNotIn("interrupted", f.read())


if __name__ == "__main__":
    unittest.main()


class TestServer(unittest.TestCase):
    def test_a_burst_of_connections_waits_to_be_accepted(self):
        srv = ax_executor._Server(("127.0.0.1", 0), ax_executor._Handler)
        self.addCleanup(srv.server_close)
        conns = []
        self.addCleanup(lambda: [c.close() for c in conns])
        for i in range(200):  # nothing accepts: all wait in the listen backlog
            try:
                conns.append(socket.create_connection(srv.server_address, timeout=2))
            except OSError as e:
                self.fail("connection %d of a burst: %s (the listen backlog is too short)" % (i + 1, e))


class TestBodies(unittest.TestCase):
    def setUp(self):
        self.h = Harness({"t": lambda ctx: None})

    def tearDown(self):
        self.h.close()

    def test_bad_bodies_get_go_shaped_reasons(self):
        cases = [
            (b"[" * 100000, "malformed dispatch: exceeded max depth"),
            (b'{"version":1,"task":"t","ticket":"a","params":{"n":' + b"9" * 5000 + b"}}",
             "malformed dispatch: json: cannot unmarshal number 99999999999999999999… into Go value of type float64"),
            (b'{"version":1,"task":"t","ticket":"a","instance_id":' + b"9" * 5000 + b"}",
             "malformed dispatch: json: cannot unmarshal number 99999999999999999999… into Go value of type float64"),
            (b'{"version":1,"task":"t","ticket":"a","params":{"n":NaN}}', "malformed dispatch: invalid character 'N' at offset 52"),
            (b'{"version":1', "malformed dispatch: unexpected end of JSON input"),
            (b"hello", "malformed dispatch: invalid character 'h' at offset 1"),
        ]
        for body, want in cases:
            code, ans = self.h.post("/dispatch", body)
            self.assertEqual((code, ans["reason"]), (400, want), body[:60])
        code, ans = self.h.post("/kill", b"[" * 100000)
        self.assertEqual((code, ans["reason"]), (400, 'malformed kill: want {"ticket": "…"}'))
        self.assertEqual(self.h.x.tickets, {})

    def test_foreign_origin_refused_without_a_console(self):
        code, ans = self.h.post("/dispatch", {"version": 1, "task": "t", "ticket": "o"}, {"Origin": "http://evil.example"})
        self.assertEqual(code, 403)
        self.assertEqual(ans["error"], 'Origin "http://evil.example" is foreign: a web page of another site cannot call this executor; '
                                       "its scheduler calls it with no Origin header")
        self.assertEqual(self.h.x.tickets, {})


class TestStateDir(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def test_a_deleted_lock_file_lets_no_second_process_in(self):
        first = ax_executor._Journal(self.dir, time.time())
        self.addCleanup(first.close)
        os.unlink(os.path.join(self.dir, "lock"))
        before = read(os.path.join(self.dir, "tickets.jsonl"))
        with self.assertRaises(RuntimeError) as cm:
            ax_executor._Journal(self.dir, time.time())
        self.assertIn("state dir %s is in use by another executor process" % self.dir, str(cm.exception))
        self.assertIn("give each executor its own", str(cm.exception))
        self.assertEqual(read(os.path.join(self.dir, "tickets.jsonl")), before)
        first.close()
        ax_executor._Journal(self.dir, time.time()).close()  # free once the first is gone

    def test_a_garbled_line_is_reported_and_its_ticket_never_runs_again(self):
        ran = []
        x = in_(600)
        good = {"t": "ok", "s": "accepted", "d": {"version": 1, "task": "t", "ticket": "ok"}, "x": x}
        with open(os.path.join(self.dir, "tickets.jsonl"), "w") as f:
            f.write(json.dumps(good) + "\n")
            f.write('{"t":"g1","s":"accepted","d":{"version":1,"ta\n')  # garbled accepted line
            f.write('{"t":"g1","s":"started"}\n')
        h = Harness({"t": lambda ctx: ran.append(ctx.ticket)}, state_dir=self.dir)
        self.addCleanup(h.close)
        msgs = h.rec.messages()
        bad = [f for m, f in msgs if m == "journal_line_unreadable"]
        self.assertEqual([f["line"] for f in bad], [os.path.join(self.dir, "tickets.jsonl") + ":2"])
        code, ans = h.post("/status", {"tickets": ["g1"]})
        self.assertEqual(code, 200, ans)
        st = ans["tickets"]["g1"]
        self.assertEqual((st["state"], st["result"]["status"], st["result"]["error"]), ("done", "failed", ax_executor.INTERRUPTED))
        code, rep = h.dispatch("t", "g1")
        self.assertEqual((code, rep["error"]), (200, ax_executor.INTERRUPTED))
        wait_for(lambda: "ok" in ran, "the accepted ticket to run")
        self.assertNotIn("g1", ran)

"""The Python side of the SDK conformance suite (cmd/ax's
TestSDKConformance): the executor of sdk/conformance/goexec, with the same
flags and tasks, on the Python SDK (sdk/python/ax_executor.py); params.span also opens a span of that name
(ctx.span) with the ctx.traceparent it saw as an attribute."""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from ax_executor import Executor  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("-listen", default="127.0.0.1:9090")
    p.add_argument("-scheduler", default="")
    p.add_argument("-tasks", default="a,b,c")
    p.add_argument("-record", default="")
    p.add_argument("-token-file", dest="token_file", default="")
    p.add_argument("-state", default="")
    p.add_argument("-core", type=int, default=2)
    p.add_argument("-max", type=int, default=4)
    p.add_argument("-queue", type=int, default=10)
    p.add_argument("-heartbeat", default="500ms")
    a = p.parse_args()
    hb = a.heartbeat
    hb = float(hb[:-2]) / 1000 if hb.endswith("ms") else float(hb.rstrip("s"))
    x = Executor(address="http://" + a.listen, schedulers=a.scheduler, token=os.environ.get("AX_EXECUTOR_TOKEN", ""),
                 token_file=a.token_file, state_dir=a.state, core=a.core, max=a.max, queue=a.queue, heartbeat=hb)

    def work(ctx):
        note(a.record, "start", ctx)
        ctx.log.info("working", extra={"ticket": ctx.ticket})
        if ctx.params.get("echo_env"):
            ctx.log.info("env", extra={ctx.params["echo_env"]: ctx.env.get(ctx.params["echo_env"], "")})
        if ctx.params.get("span"):
            with ctx.span(ctx.params["span"], traceparent_seen=ctx.traceparent or "none"):
                pass
        if ctx.wait(float(ctx.params.get("sleep_ms", 0)) / 1000):
            return
        if ctx.params.get("fail"):
            raise RuntimeError(ctx.params["fail"])
        for k in sorted(ctx.params.get("outputs") or {}):
            ctx.output(k, ctx.params["outputs"][k])
        note(a.record, "end", ctx)

    for name in a.tasks.split(","):
        x.task(name)(work)
    x.serve(a.listen)


def note(record, what, ctx):
    if not record:
        return
    with open(record, "a") as f:
        f.write("%s %s %s\n" % (what, ctx.task, ctx.ticket))
        f.flush()
        os.fsync(f.fileno())


if __name__ == "__main__":
    main()

"""An example business service in Python that runs ax tasks over HTTP with
the Python executor SDK (sdk/python/ax_executor.py). It serves the
orders_daily pipeline's sync_orders task beside the Go example executor
(examples/executor): both register for it, and the scheduler hands its runs
to them in turn. `make run` starts it when python3 is installed.

    python3 examples/python/executor.py --listen 127.0.0.1:9091 \\
        --scheduler http://127.0.0.1:8080 --token-file executor.token --state bin/py-state
"""

import argparse
import os
import sys

# The SDK is one module: installed (pip install ./sdk/python), or beside this
# file's repository as here.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python"))

from ax_executor import Executor, Permanent  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--listen", default="127.0.0.1:9091", help="address to serve dispatches on")
    p.add_argument("--scheduler", default="", help="base URLs of ax servers, comma-separated")
    p.add_argument("--token-file", default="", help="ax server's executor credential file (when AX_EXECUTOR_TOKEN is not set)")
    p.add_argument("--state", default="", help="directory of this executor's ticket journal")
    a = p.parse_args()

    executor = Executor(address="http://" + a.listen, schedulers=a.scheduler,
                        token=os.environ.get("AX_EXECUTOR_TOKEN", ""), token_file=a.token_file, state_dir=a.state)

    @executor.task("sync_orders")
    def sync_orders(ctx):
        source = ctx.params.get("source")
        batch = int(ctx.params.get("batch", 1000))
        if not source:
            raise Permanent("params.source is required")  # no retry can fix that
        ctx.log.info("syncing", extra={"source": source, "day": ctx.logical_time.date().isoformat(), "ticket": ctx.ticket})
        rows = 0
        for _ in range(3):  # the real work would page through the source, batch rows at a time
            if ctx.wait(0.1):  # killed, or past the deadline: stop here
                return
            rows += batch
        ctx.log.info("synced", extra={"rows": rows})
        ctx.output("rows", rows)

    executor.serve(a.listen)


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# make run: ax server and the example executor, on two ports derived from one
# setting (PORT; the executor listens on PORT+1010, so 8080 gives 9090), and,
# when python3 is installed, the Python example executor on PORT+1011 (both
# serve orders_daily.sync_orders; PYTHON=none leaves it out).
# Both ports are checked before anything starts, and the executor starts only
# once the server listens: a busy port leaves nothing half-started.
set -euo pipefail
BIN=${BIN:-bin/ax}
EXECUTOR=${EXECUTOR:-bin/example-executor}
STORE=${STORE:-ax.db}
PIPELINES=${PIPELINES:-examples}
# The directory of the pipelines' secrets (one file each), for
# --secrets-dir: SECRETS_DIR, else examples/secrets when it is there
# (orders_daily.clean_orders takes warehouse_password from it).
SECRETS_DIR=${SECRETS_DIR:-}
if [ -z "$SECRETS_DIR" ] && [ -d examples/secrets ]; then SECRETS_DIR=examples/secrets; fi
secrets_flag=()
[ -n "$SECRETS_DIR" ] && secrets_flag=(--secrets-dir "$SECRETS_DIR")
PORT=${PORT:-8080}

case $PORT in
  ''|*[!0-9]*) echo "make run: PORT=$PORT is not a port number (use, for example, make run PORT=8081)" >&2; exit 2 ;;
esac
EXECUTOR_PORT=${EXECUTOR_PORT:-$((PORT + 1010))}
PYTHON=${PYTHON:-python3}
PY_EXECUTOR_PORT=""
if [ "$PYTHON" != none ] && command -v "$PYTHON" >/dev/null 2>&1; then
  PY_EXECUTOR_PORT=${PY_EXECUTOR_PORT:-$((EXECUTOR_PORT + 1))}
fi
if [ "$PORT" -lt 1 ] || [ "$PORT" -gt 64525 ]; then
  echo "make run: PORT=$PORT is out of range: use 1..64525 (the example executor takes PORT+1010)" >&2
  exit 2
fi

# listening PORT: something accepts connections on 127.0.0.1:PORT.
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

for p in "$PORT" "$EXECUTOR_PORT" $PY_EXECUTOR_PORT; do
  if listening "$p"; then
    what="ax server (PORT)"; [ "$p" = "$EXECUTOR_PORT" ] && what="the example executor (PORT+1010)"
    [ "$p" = "$PY_EXECUTOR_PORT" ] && what="the Python example executor (PORT+1011; PYTHON=none leaves it out)"
    echo "make run: port $p on 127.0.0.1, needed by $what, is busy: another program listens there (see: ss -ltnp 'sport = :$p')." >&2
    echo "make run: nothing was started. Stop that program, or pick other ports: make run PORT=$((PORT + 1))" >&2
    exit 1
  fi
done

# The files, checked as ax server will check them; a valid set is summed up
# with the zone each pipeline schedules in (the "zones:" line).
checked=$("$BIN" validate "$PIPELINES" 2>&1) || { printf '%s\n' "$checked" >&2; exit 1; }
printf '%s\n' "$checked" >&2
zones=$(printf '%s\n' "$checked" | sed -n 's/^zones: //p')

server=""; executor=""; pyexecutor=""
stop() {
  trap - EXIT INT TERM
  [ -n "$pyexecutor" ] && kill "$pyexecutor" 2>/dev/null || true
  [ -n "$executor" ] && kill "$executor" 2>/dev/null || true
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap stop EXIT
trap 'stop; exit 130' INT TERM

"$BIN" server --store "$STORE" --pipelines "$PIPELINES" "${secrets_flag[@]}" --listen "127.0.0.1:$PORT" &
server=$!
# Wait until the server listens, or has given up (its own message says why).
for _ in $(seq 1 300); do
  if ! kill -0 "$server" 2>/dev/null; then
    set +e; wait "$server"; rc=$?; set -e
    server=""
    echo "make run: ax server did not start (its message is above); the example executor was not started." >&2
    exit "$rc"
  fi
  listening "$PORT" && break
  sleep 0.1
done

# The executor authenticates with the credential the server made on its
# first start beside its SQLite store (or AX_EXECUTOR_TOKEN, when set for both).
token_file=""
case $STORE in
  mysql://*) ;;
  *) token_file="$(dirname "${STORE#sqlite:}")/executor.token" ;;
esac
"$EXECUTOR" -listen "127.0.0.1:$EXECUTOR_PORT" -scheduler "http://127.0.0.1:$PORT" -state "bin/executor-state-$EXECUTOR_PORT" -token-file "$token_file" &
executor=$!
py_note=""
if [ -n "$PY_EXECUTOR_PORT" ]; then
  # Its ticket journal beside the ax binary (bin/ for make run).
  "$PYTHON" "$(dirname "$0")/../examples/python/executor.py" --listen "127.0.0.1:$PY_EXECUTOR_PORT" --scheduler "http://127.0.0.1:$PORT" \
    --state "$(dirname "$BIN")/py-executor-state-$PY_EXECUTOR_PORT" --token-file "$token_file" &
  pyexecutor=$!
  py_note=", Python example executor on 127.0.0.1:$PY_EXECUTOR_PORT"
fi
echo "make run: console http://127.0.0.1:$PORT/ (ax commands: export AX_SERVER=http://127.0.0.1:$PORT), example executor on 127.0.0.1:$EXECUTOR_PORT$py_note; Ctrl-C stops them all." >&2
echo "make run: schedules fire in each pipeline's zone: $zones" >&2
echo "make run: ax and the console print a pipeline's times in its zone (add --utc to ax commands for UTC)." >&2

# Whichever ends first ends the other.
set +e
wait -n "$server" "$executor" $pyexecutor
rc=$?
set -e
exit "$rc"

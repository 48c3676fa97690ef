#!/usr/bin/env bash
# Run `chainrecall check` against a freshly started `chainrecall serve`, then stop the server.
#
#   .ci/check-live.sh                                   # a fresh SQLite file in a temp dir
#   .ci/check-live.sh --db postgresql://postgres@127.0.0.1:5432/chainrecall_check
#   .ci/check-live.sh --db ... -- --junit build/check.xml --json build/check.json
#
# Arguments after `--` go to `chainrecall check`. The server listens on a free loopback port;
# the check writes only into threads of its own, so an existing database is safe to use.
# Exit status: that of `chainrecall check` (0 only when every check passed), or 1 when the
# server did not come up (its log is printed). VENV (default .venv) names the environment.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${VENV:-.venv}/bin/python"
db=""
check_args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --db) db="${2:?--db needs a path or a postgresql:// URL}"; shift 2 ;;
    --db=*) db="${1#--db=}"; shift ;;
    --) shift; check_args=("$@"); break ;;
    *) echo "check-live.sh: unknown argument $1; usage: $0 [--db PATH|URL] [-- check args]" >&2
       exit 2 ;;
  esac
done

workdir="$(mktemp -d)"
db="${db:-$workdir/check-live.db}"
port="$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
url="http://127.0.0.1:$port"

"$PY" -m chainrecall serve --db "$db" --port "$port" --log-level warning >"$workdir/serve.log" 2>&1 &
server_pid=$!

stop_server() {
  if kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null || true
    for _ in $(seq 1 150); do  # up to 15 s for a clean shutdown, then SIGKILL
      kill -0 "$server_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$server_pid" 2>/dev/null || true
  fi
  wait "$server_pid" 2>/dev/null || true
  rm -rf "$workdir"
}
trap stop_server EXIT

# Wait (at most 30 s) until the server answers /healthz.
ready=0
for _ in $(seq 1 300); do
  if ! kill -0 "$server_pid" 2>/dev/null; then break; fi
  if "$PY" -c 'import sys, httpx; httpx.get(sys.argv[1] + "/healthz", timeout=1).raise_for_status()' \
      "$url" 2>/dev/null; then
    ready=1
    break
  fi
  sleep 0.1
done
if [[ $ready -ne 1 ]]; then
  echo "check-live.sh: chainrecall serve --db $db did not answer on $url within 30 s; its log:" >&2
  cat "$workdir/serve.log" >&2
  exit 1
fi

echo "check-live.sh: chainrecall serve --db $db on $url"
"$PY" -m chainrecall check "$url" "${check_args[@]}"

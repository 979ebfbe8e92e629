# 58-serve-keep-alive: HTTP/1.1 keep-alive in `k3 serve` (docs/SERVE.md,
# "Connections"), with a tiny model, --keep-alive-s 1, --keep-alive-requests
# 4 and --max-queue 2 (so at most 11 connection threads), all on loopback:
#  - several requests, one after another, on one socket (Keep-Alive hint,
#    the cap's last answer says close and the server closes);
#  - two requests pipelined in one write: both answered, in order;
#  - an idle kept connection is closed by the server after --keep-alive-s,
#    without an answer;
#  - "Connection: close" and HTTP/1.0 close; HTTP/1.0 with "Connection:
#    keep-alive" is kept;
#  - a stream is chunked on a kept HTTP/1.1 connection and the connection
#    takes the next request; an HTTP/1.0 stream runs to the close;
#  - 30 idle kept connections (more than the connection threads) do not
#    keep a new client out, and a client at --max-per-client with idle
#    connections gets its new one (an idle one is closed for it).
# The driver stops by itself (every socket has a timeout).
. tests/gates/lib.sh
tokdir=../shared/k3-release
work="$K3_BUILD/serve-keep-alive"
rm -rf "$work"
mkdir -p "$work"
dir=$(model serve-tiny tiny-a --vocab 163840)
. tests/gates/serve_lib.sh
start_server srv "$K3_BIN" --keep-alive-s 1 --keep-alive-requests 4 --max-queue 2 \
    --max-per-client 16 --header-timeout 2 --max-tokens 4 ||
    die "k3 serve did not start: $(cat "$work/srv.log")"
"$PYTHON" tests/gates/keep_alive_check.py "$port" ||
    die "keep-alive checks failed (server log: $work/srv.log)"
stop_server "$pid" srv

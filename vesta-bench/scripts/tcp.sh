#!/usr/bin/env bash
# Bounded loopback benchmark of `vesta serve tcp` with `vesta bench tcp` (docs/bench/tcp.md):
# pipelined single IDs, batches, fixed-rate latency, and two servers. Builds nothing: run after
#   cargo build --profile dist -p vesta-cli --bin vesta
# Env: SECONDS_PER_RUN (10), TYPE (max-peak | min-granularity), SERVER (the `vesta` binary that
# serves, e.g. an older build for a before/after comparison in one run; the load always comes
# from this checkout's `vesta bench tcp`), GEN_IDS (IDs for the `vesta gen --server` run;
# 5,120,000). Every server it starts is bounded by `timeout` and stopped by PID on exit.
set -euo pipefail
# shellcheck source=vesta-bench/scripts/lib.sh
. "$(dirname "$0")/lib.sh"

DUR=${SECONDS_PER_RUN:-10}
TYPE=${TYPE:-max-peak}
T=${CARGO_TARGET_DIR:-target}/dist
SERVER=${SERVER:-$T/vesta}
GEN_IDS=${GEN_IDS:-5120000}
A=127.0.0.1:17654
B=127.0.0.1:17655
TICK=$(getconf CLK_TCK)

conf=$(mktemp)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    rm -f "$conf"
}
trap cleanup EXIT
printf '[id]\ntype = "%s"\n' "$TYPE" >"$conf"

timeout 1800 "$SERVER" serve tcp --config "$conf" --listen "$A" --machine 924 2>/tmp/vesta-tcp-a.log &
pids+=($!)
timeout 1800 "$SERVER" serve tcp --config "$conf" --listen "$B" --machine 925 2>/tmp/vesta-tcp-b.log &
pids+=($!)
wait_listening "$A" "$B"
A_PID=$(pgrep -P "${pids[0]}") # the server itself, not `timeout`

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

echo "## machine"
echo "cpus: $(nproc) x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "kernel: $(uname -r); $(rustc --version); layout $TYPE; server $("$SERVER" --version | head -1)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
run() { # title bench-args...
    local title=$1 before after
    shift
    echo
    echo "### $title (load avg $(cut -d' ' -f1 /proc/loadavg))"
    echo '```'
    before=$(ticks "$A_PID")
    timeout 120 "$T/vesta" bench tcp -d "${DUR}s" "$@" 2>/dev/null
    after=$(ticks "$A_PID")
    awk -v t=$((after - before)) -v hz="$TICK" -v s="$DUR" \
        'BEGIN { printf "server CPU (first server): %.1f%% of one core\n", (t / hz) * 100 / s }'
    echo '```'
}
run "single IDs, pipelined" --server "$A" -c 2 -p 64
run "batches of 65,536" --server "$A" -c 1 -p 4 -b 65536
run "batches of 1,000" --server "$A" -c 2 -p 8 -b 1000
run "fixed 20,000 req/s, 1 connection" --server "$A" -c 1 -p 64 -r 20000
run "fixed 20,000 req/s, 4 connections" --server "$A" -c 4 -p 64 -r 20000
run "two servers, single IDs" --server "$A,$B" -c 4 -p 64
echo
echo "### vesta gen --server, $GEN_IDS IDs (load avg $(cut -d' ' -f1 /proc/loadavg))"
start=$(date +%s.%N)
timeout 300 "$T/vesta" gen --server "$A" -n "$GEN_IDS" | wc -l
end=$(date +%s.%N)
awk -v n="$GEN_IDS" -v s="$start" -v e="$end" 'BEGIN { printf "%.0f IDs/s\n", n / (e - s) }'
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

#!/usr/bin/env bash
# Bounded loopback benchmark of `vesta serve rest` against a bare hyper handler, in the same run
# (docs/bench/rest.md). Builds nothing: run after
#   cargo build --release -p vesta-cli --bin vesta && cargo build --release -p vesta-rest --examples
# Env: ROUNDS (3), SECONDS_PER_RUN (10), CONNS (64), THREADS (2), RATE (20000), RATE_SECONDS (30),
#      RATE_CONNS (16). Every process it starts is bounded by `timeout` and killed by PID on exit.
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DUR=${SECONDS_PER_RUN:-10}
CONNS=${CONNS:-64}
THREADS=${THREADS:-2}
RATE=${RATE:-20000}
RATE_SECONDS=${RATE_SECONDS:-30}
RATE_CONNS=${RATE_CONNS:-16}
T=${CARGO_TARGET_DIR:-target}/release
VESTA_ADDR=127.0.0.1:18080
BARE_ADDR=127.0.0.1:18081
TICK=$(getconf CLK_TCK)

pids=()
cleanup() { for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

timeout 1800 "$T/vesta" serve rest --listen "$VESTA_ADDR" 2>/tmp/vesta-rest-bench.log &
pids+=($!)
"$T/examples/bare_hyper" "$BARE_ADDR" 1800 >/tmp/bare-hyper-bench.log &
pids+=($!); BARE_PID=$!
sleep 1
VESTA_PID=$(pgrep -P "${pids[0]}") # the server itself, not `timeout`

# CPU ticks (user + system) a process has used so far.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

echo "## machine"
echo "cpus: $(nproc) x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "kernel: $(uname -r); $(rustc --version); $(wrk --version 2>&1 | head -1 | cut -d' ' -f1-2)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "## wrk -t$THREADS -c$CONNS -d${DUR}s, $ROUNDS interleaved rounds (req/s; server CPU us per request)"
echo "| round | bare hyper | /genid | /genid ÷ bare | /genids?count=1000 | load avg |"
echo "|---|---|---|---|---|---|"
run_wrk() { # url pid -> "req/s cpu_us_per_req"
    local before after out rps
    before=$(ticks "$2")
    out=$(wrk -t"$THREADS" -c"$CONNS" -d"${DUR}s" "$1")
    after=$(ticks "$2")
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    awk -v r="$rps" -v t=$((after - before)) -v hz="$TICK" -v d="$DUR" \
        'BEGIN { printf "%.0f %.2f\n", r, (t / hz) * 1e6 / (r * d) }'
}
for round in $(seq 1 "$ROUNDS"); do
    read -r bare bare_cpu < <(run_wrk "http://$BARE_ADDR/" "$BARE_PID")
    read -r genid genid_cpu < <(run_wrk "http://$VESTA_ADDR/genid" "$VESTA_PID")
    read -r batch batch_cpu < <(run_wrk "http://$VESTA_ADDR/genids?count=1000" "$VESTA_PID")
    ratio=$(awk -v a="$genid" -v b="$bare" 'BEGIN { printf "%.2f", a / b }')
    echo "| $round | $bare ($bare_cpu us) | $genid ($genid_cpu us) | $ratio | $batch ($batch_cpu us) | $(cut -d' ' -f1 /proc/loadavg) |"
done
echo
echo "## fixed rate: $RATE req/s, $RATE_CONNS connections, ${RATE_SECONDS}s after 3 s warm-up"
for target in "vesta /genid|$VESTA_ADDR|/genid|$VESTA_PID" "bare hyper|$BARE_ADDR|/|$BARE_PID"; do
    IFS='|' read -r name addr path pid <<<"$target"
    before=$(ticks "$pid")
    echo "### $name (load avg $(cut -d' ' -f1 /proc/loadavg))"
    timeout 120 "$T/examples/rate_client" --addr "$addr" --path "$path" --rate "$RATE" \
        --seconds "$RATE_SECONDS" --connections "$RATE_CONNS" --warmup-seconds 3
    after=$(ticks "$pid")
    awk -v t=$((after - before)) -v hz="$TICK" -v n="$RATE" -v s="$RATE_SECONDS" \
        'BEGIN { printf "server CPU: %.1f%% of one core\n", (t / hz) * 100 / (s + 3.2) }'
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

#!/usr/bin/env bash
# Bounded loopback benchmark of servers holding k machine IDs (`--machine-ids K`, issue 50), in
# one run beside the peer it is set against: Redis 7 `INCR` pipelined (one key, the same
# connections and pipeline, `vesta bench tcp --peer redis`). Runs: TCP single IDs pipelined
# (k = 1 and k = K), TCP `NEXT_IDS 1000` and `65536`, gRPC `StreamIds` and REST
# `/genids?count=1000` on a `vesta serve rest` of K IDs, and single IDs at a fixed 20,000
# req/s for the tail. Builds nothing: run after
#   cargo build --release -p vesta-cli --bin vesta        (or PROFILE=dist with --profile dist)
# Env: K (8), TYPE (max-peak | min-granularity), SECONDS_PER_RUN (10), PROFILE (release),
# RATE_SECONDS (20). Needs redis-server. Every process it starts is bounded by `timeout` and
# stopped by PID on exit.
set -euo pipefail
# shellcheck source=vesta-bench/scripts/lib.sh
. "$(dirname "$0")/lib.sh"

K=${K:-8}
DUR=${SECONDS_PER_RUN:-10}
RATE_DUR=${RATE_SECONDS:-20}
TYPE=${TYPE:-max-peak}
T=${CARGO_TARGET_DIR:-target}/${PROFILE:-release}
V=$T/vesta
ONE=127.0.0.1:17664
MANY=127.0.0.1:17665
REST=127.0.0.1:17666
REDIS=127.0.0.1:17667
TICK=$(getconf CLK_TCK)

work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    sleep 0.5
    rm -rf "$work"
}
trap cleanup EXIT
printf '[id]\ntype = "%s"\n' "$TYPE" >"$work/server.toml"
export VESTA_HOLD_DIR=$work/holds

timeout 1800 "$V" serve tcp --config "$work/server.toml" --listen "$ONE" --machine 924 \
    2>"$work/one.log" &
pids+=($!)
timeout 1800 "$V" serve tcp --config "$work/server.toml" --listen "$MANY" --machine 930 \
    --machine-ids "$K" 2>"$work/many.log" &
pids+=($!)
timeout 1800 "$V" serve rest --config "$work/server.toml" --listen "$REST" --machine 950 \
    --machine-ids "$K" 2>"$work/rest.log" &
pids+=($!)
timeout 1800 redis-server --bind 127.0.0.1 --port "${REDIS##*:}" --save "" --appendonly no \
    --dir "$work" >"$work/redis.log" 2>&1 &
pids+=($!)
wait_listening "$ONE" "$MANY" "$REST" "$REDIS"
ONE_PID=$(pgrep -P "${pids[0]}")
MANY_PID=$(pgrep -P "${pids[1]}")
REST_PID=$(pgrep -P "${pids[2]}")
REDIS_PID=$(pgrep -P "${pids[3]}")

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

echo "## machine"
echo "cpus: $(nproc) x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "kernel: $(uname -r); $(rustc --version); layout $TYPE; k = $K; $(redis-server --version | cut -d' ' -f1-3)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
head -1 "$work/many.log"
run() { # title server-pid seconds protocol bench-args...
    local title=$1 pid=$2 secs=$3 proto=$4 before after
    shift 4
    echo
    echo "### $title (load avg $(cut -d' ' -f1 /proc/loadavg))"
    echo '```'
    before=$(ticks "$pid")
    timeout 180 "$V" bench "$proto" -d "${secs}s" "$@" 2>&1
    after=$(ticks "$pid")
    awk -v t=$((after - before)) -v hz="$TICK" -v s="$secs" \
        'BEGIN { printf "server CPU: %.1f%% of one core\n", (t / hz) * 100 / s }'
    echo '```'
}
run "Redis INCR pipelined, 1 key" "$REDIS_PID" "$DUR" tcp --peer redis --server "$REDIS" \
    --seq-keys 1 -c 2 -p 64
run "TCP single IDs pipelined, k = 1" "$ONE_PID" "$DUR" tcp --server "$ONE" -c 2 -p 64
run "TCP single IDs pipelined, k = $K" "$MANY_PID" "$DUR" tcp --server "$MANY" -c 2 -p 64
run "Redis INCR pipelined, 1 key (again)" "$REDIS_PID" "$DUR" tcp --peer redis \
    --server "$REDIS" --seq-keys 1 -c 2 -p 64
run "TCP NEXT_IDS 1000, k = $K" "$MANY_PID" "$DUR" tcp --server "$MANY" -c 2 -p 8 -b 1000
run "TCP NEXT_IDS 65536, k = $K" "$MANY_PID" "$DUR" tcp --server "$MANY" -c 1 -p 4 -b 65536
run "gRPC StreamIds, k = $K" "$REST_PID" "$DUR" grpc --server "$REST" -c 2 -b 1000000 --stream
run "REST /genids?count=1000, k = $K" "$REST_PID" "$DUR" rest --server "$REST" -c 16 -b 1000
run "TCP single IDs at 20,000 req/s, 1 connection, k = 1" "$ONE_PID" "$RATE_DUR" tcp \
    --server "$ONE" -c 1 -p 64 -r 20000
run "TCP single IDs at 20,000 req/s, 1 connection, k = $K" "$MANY_PID" "$RATE_DUR" tcp \
    --server "$MANY" -c 1 -p 64 -r 20000
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

#!/usr/bin/env bash
# Per-key sequences across servers (issue 34, docs/seq-cluster.md): the same seq load on one
# member of a cluster and on two, in the same run, on an SQLite table and on a PostgreSQL one.
# Per table and round: member A alone (the other stopped cleanly, A owning all 256 sets) loaded
# by `vesta bench tcp --server A --seq-keys N` (the direct engine) and by `--server A,A` (the
# routing engine, one member: what routing costs the tool), then member B joins and
# `--server A,B` (each key sent to its owner, learned from SEQ_MOVED) runs with the same keys,
# connections, pipeline and duration; B then stops cleanly (its sets go back to A). Each run is
# preceded by a warm-up run of the same shape (the sets that moved are loaded and raised by
# their new owner there, not in the measured run). Prints every report, the CPU of each server
# and of the load tool, the table writes (metrics), and a summary with the ratio two ÷ one.
# Builds nothing: run after
#   cargo build --profile dist -p vesta-cli --bin vesta
# Needs PostgreSQL (/usr/lib/postgresql/*/bin). Env: SECONDS_PER_RUN (10), WARMUP_SECONDS (3),
# KEYS (25600000: 256 sections, one per set, so both members get half the keys), CONNS (2),
# PIPELINE (64), ROUNDS (2), TTL_MS (3000: the members' lease), DBS ("sqlite postgres"), SERVER
# (the `vesta` binary that serves; the load always comes from this checkout's). Every server
# listens on loopback only, is bounded by `timeout` (PostgreSQL: by this script's trap) and is
# stopped by PID on exit.
set -euo pipefail
# shellcheck source=vesta-bench/scripts/lib.sh
. "$(dirname "$0")/lib.sh"

DUR=${SECONDS_PER_RUN:-10}
WARMUP=${WARMUP_SECONDS:-3}
KEYS=${KEYS:-25600000}
CONNS=${CONNS:-2}
PIPE=${PIPELINE:-64}
ROUNDS=${ROUNDS:-2}
TTL_MS=${TTL_MS:-3000}
DBS=${DBS:-sqlite postgres}
T=${CARGO_TARGET_DIR:-target}/dist
SERVER=${SERVER:-$T/vesta}
A=127.0.0.1:17670
A_METRICS=127.0.0.1:19670
B=127.0.0.1:17671
B_METRICS=127.0.0.1:19671
PG_PORT=15433
TICK=$(getconf CLK_TCK)
PG_BIN=$(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V | tail -1)

work=$(mktemp -d)
chmod 755 "$work"
pids=()
A_PID="" B_PID=""
pg_pid=""
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    if [ -n "$pg_pid" ]; then kill -INT "$pg_pid" 2>/dev/null || true; fi
    sleep 1
    rm -rf "$work"
}
trap cleanup EXIT

# 1234567 as 1,234,567.
group() { sed ':a;s/\B[0-9]\{3\}\>/,&/;ta' <<<"$1"; }
# CPU ticks (user + system) a process has used so far.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# CPU ticks of this script's waited-for children: the load tool's own CPU.
child_ticks() { awk '{print $16 + $17}' "/proc/$$/stat"; }
# Ticks over the run as % of one core.
pct() { awk -v t="$1" -v hz="$TICK" -v s="$DUR" 'BEGIN { printf "%.0f", (t / hz) * 100 / s }'; }
# A counter of vesta's /metrics at HOST:PORT (0 when absent).
metric() { { curl -sf "http://$1/metrics" || true; } | awk -v m="$2" '$1 == m {v = $2} END {print v + 0}'; }
# A figure of a report: numbers/s, errors, p99.9 (µs).
field() { # report-file what
    case $2 in
    nps) awk '/^numbers/ {gsub(",", "", $4); print $4}' "$1" ;;
    errors) awk '/^errors/ {gsub(":", "", $2); gsub(",", "", $2); print $2}' "$1" ;;
    moves) awk '/^routing/ {gsub(",", "", $2); print $2}' "$1" ;;
    p999) awk '/^latency/ {
            for (i = 2; i < NF; i++) if ($i == "p99.9") {
                v = $(i + 1); u = $(i + 2); gsub(",", "", v)
                printf "%.0f\n", (u == "ms" ? v * 1000 : (u == "s" ? v * 1e6 : v)); exit } }' "$1" ;;
    esac
}

# member NAME MACHINE LISTEN METRICS DB: starts a cluster member; sets ${NAME}_PID (the server,
# not `timeout`) and ${NAME}_T (the `timeout` wrapping it).
member() {
    local name=$1 machine=$2 listen=$3 metrics=$4 db=$5
    # max_sections 300: one member alone holds all 256 sections (205 MB; the default bound is 125).
    printf '[server]\nmetrics_listen = "%s"\n\n[seq]\ncluster_ttl_ms = %s\nmax_sections = 300\n' \
        "$metrics" "$TTL_MS" >"$work/$name.toml"
    timeout 3600 "$SERVER" serve tcp --config "$work/$name.toml" --listen "$listen" \
        --machine "$machine" --seq-db "$db" --seq-cluster 2>>"$work/$name.log" &
    local t=$!
    pids+=("$t")
    wait_listening "$listen" "$metrics"
    printf -v "${name}_T" '%s' "$t"
    printf -v "${name}_PID" '%s' "$(pgrep -P "$t")"
}
# stop_member NAME: SIGTERM (a clean stop hands its sets off) and wait for it.
stop_member() {
    local t_var="${1}_T" pid_var="${1}_PID"
    kill -TERM "${!pid_var}"
    wait "${!t_var}" || true
}
# settled DB N: waits (up to 30 s) until `vesta seq ls` shows N live members, N owners, no set
# without one; prints the owners' rows.
settled() {
    local db=$1 want=$2 ls live owners
    for _ in $(seq 300); do
        ls=$("$T/vesta" seq ls --db "$db" 2>/dev/null || true)
        live=$(grep -c ' live ' <<<"$ls" || true)
        owners=$(sed -n '/^owner /,$p' <<<"$ls" | grep -cE '^[0-9]+ ' || true)
        if [ "$live" = "$want" ] && [ "$owners" = "$want" ] && ! grep -q '^none ' <<<"$ls"; then
            sed -n '/^owner /,$p' <<<"$ls"
            return 0
        fi
        sleep 0.1
    done
    echo "not settled on $want members:"
    echo "$ls"
    return 1
}

out=$work/out
run() { # title servers -> prints the report; leaves it in $out, CPU % in $cpu_a $cpu_b $client
    local title=$1 servers=$2 a0 b0 c0 r0 l0
    "$T/vesta" bench tcp --server "$servers" --seq-keys "$KEYS" -c "$CONNS" -p "$PIPE" \
        -d "${WARMUP}s" >/dev/null 2>&1 || true
    echo
    echo "### $title (load avg $(cut -d' ' -f1 /proc/loadavg))"
    echo '```'
    echo "\$ vesta bench tcp --server $servers --seq-keys $KEYS -c $CONNS -p $PIPE -d ${DUR}s"
    r0=$(($(metric "$A_METRICS" vesta_seq_raises_total) + $(metric "$B_METRICS" vesta_seq_raises_total)))
    l0=$(($(metric "$A_METRICS" vesta_seq_section_loads_total) + $(metric "$B_METRICS" vesta_seq_section_loads_total)))
    c0=$(child_ticks)
    a0=$(ticks "$A_PID")
    b0=$([ -n "${B_PID:-}" ] && [ -e "/proc/$B_PID" ] && ticks "$B_PID" || echo 0)
    timeout 120 "$T/vesta" bench tcp --server "$servers" --seq-keys "$KEYS" -c "$CONNS" \
        -p "$PIPE" -d "${DUR}s" 2>/dev/null >"$out" || echo "(failed: $?)" >>"$out"
    cpu_a=$(pct $(($(ticks "$A_PID") - a0)))
    cpu_b=$([ -n "${B_PID:-}" ] && [ -e "/proc/$B_PID" ] && pct $(($(ticks "$B_PID") - b0)) || echo -)
    client=$(pct $(($(child_ticks) - c0)))
    raises=$(($(metric "$A_METRICS" vesta_seq_raises_total) + $(metric "$B_METRICS" vesta_seq_raises_total) - r0))
    loads=$(($(metric "$A_METRICS" vesta_seq_section_loads_total) + $(metric "$B_METRICS" vesta_seq_section_loads_total) - l0))
    cat "$out"
    echo "CPU, % of one core: member A $cpu_a, member B $cpu_b, load tool $client; table writes in the run: $raises raises, $loads section loads"
    echo '```'
}

echo "## machine"
echo "cpus: $(nproc) x $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "kernel: $(uname -r); $(rustc --version); server $("$SERVER" --version | head -1)"
echo "PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}')"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "Closed loop, ${DUR}s a run after a ${WARMUP}s warm-up of the same shape, $CONNS connections x"
echo "pipeline $PIPE, one number a call, keys drawn uniformly from 0..$KEYS; members' lease ${TTL_MS} ms."

summary=()
for kind in $DBS; do
    case $kind in
    sqlite) DB="sqlite://$work/seq-cluster.db" ;;
    postgres)
        mkdir "$work/pg"
        chown postgres:postgres "$work/pg"
        runuser -u postgres -- "$PG_BIN/initdb" -D "$work/pg" -A trust -U vesta >"$work/initdb.log"
        runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$work/pg" -l "$work/pg/server.log" \
            -o "-p $PG_PORT -k $work/pg -c listen_addresses=127.0.0.1" -w start >/dev/null
        pg_pid=$(head -1 "$work/pg/postmaster.pid")
        psql -q -h 127.0.0.1 -p "$PG_PORT" -U vesta -d postgres -c 'CREATE DATABASE vesta'
        DB=postgres://vesta@127.0.0.1:$PG_PORT/vesta
        ;;
    esac
    echo
    echo "# $kind table"
    B_PID=""
    member A 960 "$A" "$A_METRICS" "$DB"
    for round in $(seq 1 "$ROUNDS"); do
        echo
        echo "## $kind, round $round: member A alone"
        echo '```'
        settled "$DB" 1
        echo '```'
        run "$kind, one member, direct engine" "$A"
        one=$(field "$out" nps) one_p=$(field "$out" p999) one_cpu="$cpu_a / $client"
        one_err=$(field "$out" errors)
        run "$kind, one member, routing engine (A twice)" "$A,$A"
        oner=$(field "$out" nps) oner_cpu="$cpu_a / $client"

        echo
        echo "## $kind, round $round: member B joins"
        member B 961 "$B" "$B_METRICS" "$DB"
        echo '```'
        settled "$DB" 2
        echo '```'
        run "$kind, two members" "$A,$B"
        two=$(field "$out" nps) two_p=$(field "$out" p999) two_err=$(field "$out" errors)
        two_cpu="$cpu_a + $cpu_b / $client" moves=$(field "$out" moves)
        stop_member B
        B_PID=""

        ratio=$(awk -v a="$two" -v b="$one" 'BEGIN { printf "%.2f", a / b }')
        ratio_r=$(awk -v a="$two" -v b="$oner" 'BEGIN { printf "%.2f", a / b }')
        summary+=("| $kind | $round | $(group "$one") ($one_cpu %, p99.9 $(group "$one_p") µs) | $(group "$oner") ($oner_cpu %) | $(group "$two") ($two_cpu %, p99.9 $(group "$two_p") µs) | **$ratio** | $ratio_r | $moves | $one_err / $two_err | $(cut -d' ' -f1 /proc/loadavg) |")
    done
    stop_member A
    if [ "$kind" = postgres ]; then
        runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$work/pg" -m fast -w stop >/dev/null
        pg_pid=""
    fi
done

echo
echo "## summary"
echo
echo "numbers/s (CPU % of one core: servers / load tool):"
echo
echo "| table | round | one member, direct engine | one member, routing engine | two members | **two ÷ one** | two ÷ one (routing) | moves followed | errors (one / two) | load avg |"
echo "|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${summary[@]}"
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

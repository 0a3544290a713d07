# Shared by the benchmark scripts (sourced, not run).

# Waits until every HOST:PORT given accepts a connection (a start guard may wait up to a unit
# plus the rollback tolerance), at most 15 s each.
wait_listening() {
    local addr
    for addr in "$@"; do
        for _ in $(seq 150); do
            (exec 3<>"/dev/tcp/${addr%:*}/${addr##*:}") 2>/dev/null && break
            sleep 0.1
        done
    done
}

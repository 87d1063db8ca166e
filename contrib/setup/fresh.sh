#!/usr/bin/env bash
# A fresh-machine rehearsal: the suite as a new user's machine runs it, not as one where it
# has run many times.
#
#   fresh.sh reset          takes this machine back, as far as the project's own set-up goes,
#                           to what a new one has (below)
#   fresh.sh rehearse DIR   reset, then a new clone of this checkout's HEAD in DIR runs the
#                           README's test command (bash contrib/setup/test.sh); its output in
#                           DIR.log, its time and exit code on the last lines
#
# What reset undoes: the servers brokers.sh started (ActiveMQ, nginx, Tansu, Prometheus and
# its Pushgateway), the Debian packages the set-up installed (packages.sh records each,
# never one that was there before: ActiveMQ, nginx, Prometheus, Chromium, the HdrHistogram
# jar, Java where it was missing) and what they pulled in, RabbitMQ's plugins and
# settings back to the machine's, the servers and namespaces a test left behind, the queues,
# streams and keys the suite left on the machine's own servers, Tansu's tool folder and the
# rest of /var/tmp/harness-brokers, pip's cache, pytest's temporary folders.
# What it cannot undo: the services the machine itself starts before a session (Mosquitto,
# RabbitMQ, nats-server, Redis here) stay installed and running, and the kernel's and
# Erlang's caches stay warm.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=packages.sh
source contrib/setup/packages.sh
STATE=$HARNESS_STATE
say() { printf 'fresh: %s\n' "$*" >&2; }
# What brokers.sh enables on RabbitMQ (its RABBITMQ_PLUGINS, management among them).
RABBITMQ_PLUGINS="rabbitmq_stomp rabbitmq_mqtt rabbitmq_amqp1_0 rabbitmq_web_stomp rabbitmq_web_mqtt rabbitmq_management"

leftovers() {
    # Private servers and runs of an interrupted suite: their command lines name the
    # temporary folders the tests make.
    local pids
    pids=$(pgrep -f 'harness-fault-|harness-rabbitmq-|/tmp/pytest-of-' || true)
    if [ -n "$pids" ]; then
        say "stopping $(echo "$pids" | wc -w) processes the suite left"
        # shellcheck disable=SC2086
        as_root kill -9 $pids 2>/dev/null || true
    fi
    local ns
    for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^hx/ {print $1}'); do
        as_root ip netns del "$ns" || true
    done
    local address
    for address in $(ip -o addr show dev lo | grep -o '10\.199\.[0-9.]*/32' || true); do
        as_root ip addr del "$address" dev lo || true
    done
    as_root rm -rf /tmp/pytest-of-* /tmp/harness-* /tmp/pyspark-* /tmp/spark-*
}

rabbitmq_back() {
    command -v rabbitmq-plugins >/dev/null || return 0
    local original="" kept="$STATE/original/%etc%rabbitmq%enabled_plugins" plugin off=()
    [ -f "$kept" ] && original=$(cat "$kept")
    for plugin in $RABBITMQ_PLUGINS; do
        [[ $original == *"$plugin"* ]] || off+=("$plugin")
    done
    if as_root rabbitmqctl -q status >/dev/null 2>&1; then
        as_root rabbitmq-plugins -q disable "${off[@]}" >/dev/null 2>&1 || true
        # Its queues, exchanges and users as a new node has them (guest made again at boot).
        as_root rabbitmqctl -q stop_app >/dev/null && as_root rabbitmqctl -q reset >/dev/null \
            && as_root rabbitmqctl -q start_app >/dev/null
        say "rabbitmq: plugins ${off[*]} off, the node reset"
    fi
}

files_back() {
    local kept path
    for kept in "$STATE"/original/*; do
        [ -e "$kept" ] || continue
        path=$(basename "$kept" .absent | tr % /)
        if [[ $kept == *.absent ]]; then as_root rm -f "$path"; else as_root cp -p "$kept" "$path"; fi
        say "$path as it was"
    done
}

nats_back() {
    local pid; pid=$(ss -ltnpH 'sport = :4222' 2>/dev/null | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2)
    [ -n "$pid" ] || return 0
    local -a cmd; mapfile -d '' -t cmd < "/proc/$pid/cmdline"
    local store="" i
    for i in "${!cmd[@]}"; do [ "${cmd[$i]}" = "-sd" ] && store=${cmd[$((i + 1))]}; done
    [ -n "$store" ] || return 0
    as_root kill "$pid"
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    as_root rm -rf "$store/jetstream"
    as_root start-stop-daemon --start --background --exec "${cmd[0]}" -- "${cmd[@]:1}"
    for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/4222) 2>/dev/null && break; sleep 0.1; done
    say "nats: started again with an empty JetStream store"
}

packages_back() {
    local list="$STATE/installed-packages"
    [ -f "$list" ] || return 0
    local -a packages; mapfile -t packages < <(sort -u "$list")
    [ ${#packages[@]} -gt 0 ] || return 0
    say "purging ${packages[*]} and what they pulled in"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "${packages[@]}" >/dev/null
    as_root env DEBIAN_FRONTEND=noninteractive apt-get autoremove --purge -y -qq >/dev/null
    # Left by brokers.sh or the packages' scripts outside what dpkg removes.
    as_root rm -rf /usr/share/activemq /var/lib/activemq /etc/activemq /var/log/activemq
}

reset() {
    # Every server the script can start, those only named (mosquitto-many) and the
    # Pushgateway beside Prometheus among them.
    bash contrib/brokers/brokers.sh stop mosquitto activemq rabbitmq nats redis nginx kafka \
        prometheus pushgateway mosquitto-many 2>&1 | sed 's/^/fresh: /' >&2 || true
    leftovers
    rabbitmq_back
    files_back
    nats_back
    if command -v redis-cli >/dev/null; then redis-cli -h 127.0.0.1 FLUSHALL >/dev/null || true; fi
    packages_back
    as_root rm -rf "$STATE" "$HOME/.cache/pip"
    say "reset done: a new clone of this checkout now sets up as on a new machine"
}

case ${1:-} in
    reset) reset ;;
    rehearse)
        dir=${2:?usage: fresh.sh rehearse DIR}
        [ ! -e "$dir" ] || { say "$dir exists: name a new folder"; exit 2; }
        source_dir=$(pwd)
        reset
        git clone -q "$source_dir" "$dir"
        say "running the README's test command in $dir (its output in $dir.log)"
        start=$SECONDS
        code=0
        (cd "$dir" && bash contrib/setup/test.sh) > "$dir.log" 2>&1 || code=$?
        printf 'fresh: %s s, exit %s\n' "$((SECONDS - start))" "$code" | tee -a "$dir.log" >&2
        exit "$code" ;;
    *) echo "usage: fresh.sh reset | rehearse DIR" >&2; exit 2 ;;
esac

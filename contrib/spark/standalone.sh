#!/usr/bin/env bash
# A Spark standalone cluster on this machine, from the pip-installed pyspark (which has no
# sbin/start-master.sh): one Master and one Worker, started through spark-class, on 127.0.0.1.
# For trying `harness run --cluster spark://127.0.0.1:PORT` without a real cluster, and for the
# tests; a real cluster is started by its own administrators.
#
# usage: standalone.sh start|stop|status
#   HARNESS_SPARK_PORT     the Master's port (default 7077)
#   HARNESS_SPARK_CORES    the Worker's cores: task slots, one per node (default 2)
#   HARNESS_SPARK_MEMORY   the Worker's memory (default 2g: two executors of 1g)
#   HARNESS_SPARK_STATE    where the PIDs, logs and the Worker's work directory go
#                          (default /var/tmp/harness-spark-PORT)
#   PYTHON                 the Python whose pyspark to use (default: python3 on the PATH)
set -euo pipefail

PORT=${HARNESS_SPARK_PORT:-7077}
CORES=${HARNESS_SPARK_CORES:-2}
MEMORY=${HARNESS_SPARK_MEMORY:-2g}
STATE=${HARNESS_SPARK_STATE:-/var/tmp/harness-spark-$PORT}
PYTHON=${PYTHON:-python3}

say() { printf 'spark: %s\n' "$*" >&2; }
port_up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
alive() { [ -f "$STATE/$1.pid" ] && kill -0 "$(cat "$STATE/$1.pid")" 2>/dev/null; }

spark_home() {
    "$PYTHON" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))' 2>/dev/null || {
        say "no pyspark in $PYTHON: pip install pyspark (or set PYTHON)"; exit 1; }
}

launch() {  # name class args...
    local name=$1; shift
    if alive "$name"; then say "$name already up (pid $(cat "$STATE/$name.pid"))"; return; fi
    # The executors' logs and scratch go to the work directory, not into site-packages.
    SPARK_LOCAL_IP=127.0.0.1 SPARK_LOG_DIR="$STATE" nohup "$SPARK_HOME/bin/spark-class" "$@" \
        >"$STATE/$name.log" 2>&1 &
    echo $! >"$STATE/$name.pid"
}

registered() {  # the Worker says so in its log once the Master has accepted it
    grep -q "Successfully registered with master" "$STATE/worker.log" 2>/dev/null
}

start() {
    mkdir -p "$STATE/work"
    SPARK_HOME=$(spark_home)
    export SPARK_HOME
    launch master org.apache.spark.deploy.master.Master --host 127.0.0.1 --port "$PORT" \
        --webui-port 0
    local deadline=$((SECONDS + 60))
    until port_up "$PORT"; do
        alive master || { say "the Master did not start: see $STATE/master.log"; exit 1; }
        [ $SECONDS -lt $deadline ] || { say "the Master's port $PORT did not open"; exit 1; }
        sleep 0.2
    done
    launch worker org.apache.spark.deploy.worker.Worker --host 127.0.0.1 --cores "$CORES" \
        --memory "$MEMORY" --work-dir "$STATE/work" --webui-port 0 "spark://127.0.0.1:$PORT"
    until registered; do
        alive worker || { say "the Worker did not start: see $STATE/worker.log"; exit 1; }
        [ $SECONDS -lt $deadline ] || { say "the Worker did not register: see $STATE/worker.log"
                                        exit 1; }
        sleep 0.2
    done
    say "up: spark://127.0.0.1:$PORT, one Worker of $CORES cores and $MEMORY (state in $STATE)"
}

stop() {
    for name in worker master; do
        if alive "$name"; then
            kill "$(cat "$STATE/$name.pid")"
            say "$name stopped"
        fi
        rm -f "$STATE/$name.pid"
    done
}

status() {
    for name in master worker; do
        if alive "$name"; then echo "$name up (pid $(cat "$STATE/$name.pid"))"
        else echo "$name down"; fi
    done
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac

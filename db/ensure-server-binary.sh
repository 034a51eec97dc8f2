#!/usr/bin/env bash
# What this machine needs to run the outbox locally, from Debian's packages when missing.
#   db/ensure-server-binary.sh demo   `make demo` and `make dev`: a MariaDB/MySQL server binary and the
#                                     command-line client, nothing else.
#   db/ensure-server-binary.sh test   `make test` (the default): the database as above, and everything
#                                     the suite drives (below).
# Only the binaries are needed: tests and the demo run private servers in temp directories.
# For the tests: redis-server and rabbitmq-server, for the benchmark's Celery peers (bench/brokers.py),
# chromium for the console's browser tests, valgrind for bench/procedure_costs.py, perf (linux-perf) for
# bench/db_profile.py, promtool (Debian's prometheus) for the alerting rules' unit tests, and iproute2
# for the fault runs' network namespaces (bench/faults.py).
# The Galera cluster tests also need galera-4, mariadb-backup and socat: installed where apt-get can;
# without them those tests say SKIP with the reason.
# The Java example of docs/procedures.md (tests/test_other_languages.py) needs MariaDB Connector/J and
# JSON-P (the JDK has no JSON library): libmariadb-java and libjsonp-java, installed where apt-get can;
# the Go and PHP examples, Debian's golang-go and php-cli with their MySQL drivers.
set -euo pipefail
MODE="${1:-test}"
case "$MODE" in
  demo | test) ;;
  *) echo "usage: $0 [demo|test]" >&2; exit 2 ;;
esac
export PATH="$PATH:/usr/sbin:/usr/local/sbin"
have_server() { command -v mariadbd >/dev/null 2>&1 || command -v mysqld >/dev/null 2>&1; }
have_client() { command -v mariadb >/dev/null 2>&1 || command -v mysql >/dev/null 2>&1; }
have_cluster_parts() {
  [ -e /usr/lib/galera/libgalera_smm.so ] && command -v mariadb-backup >/dev/null 2>&1 && command -v socat >/dev/null 2>&1
}
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
# The Celery + Redis peer of bench/throughput.py (its tiny run is in `make test`) starts a private
# redis-server from the binary, on a free port in a temp directory, as the tests do with mariadbd.
ensure_redis() {
  command -v redis-server >/dev/null 2>&1 && return 0
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "no redis-server on PATH and no apt-get: install redis-server for the benchmark's Celery peer" >&2
    return 0
  fi
  echo "installing redis-server from Debian's packages for the benchmark's Celery peer"
  # A system service the package may start is left alone: nothing here connects to it.
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 $SUDO apt-get install -y -qq \
      --no-install-recommends redis-server >/dev/null; } \
    || echo "could not install redis-server: the benchmark's Celery peer will fail" >&2
}
# The Celery + RabbitMQ peer (durable) starts a private RabbitMQ node from Debian's rabbitmq-server: its
# own node name, ports, epmd and data directory in a temp directory. The service the package may start
# (on 5672/25672) is left alone: nothing here connects to it.
ensure_rabbitmq() {
  [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || command -v rabbitmq-server >/dev/null 2>&1 && return 0
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "no rabbitmq-server and no apt-get: install rabbitmq-server for the benchmark's Celery + RabbitMQ peer" >&2
    return 0
  fi
  echo "installing rabbitmq-server from Debian's packages for the benchmark's Celery + RabbitMQ peer"
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 $SUDO apt-get install -y -qq \
      --no-install-recommends rabbitmq-server >/dev/null; } \
    || echo "could not install rabbitmq-server: the benchmark's Celery + RabbitMQ peer will fail" >&2
}
# The console's browser tests (tests/test_console_browser.py) drive Debian's chromium through
# Playwright for Python, launched by path; no browser is ever downloaded (`playwright install` is not used).
ensure_chromium() {
  command -v chromium >/dev/null 2>&1 && return 0
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "no chromium on PATH and no apt-get: the console's browser tests will be skipped" >&2
    return 0
  fi
  echo "installing chromium from Debian's packages for the console's browser tests"
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
      --no-install-recommends chromium >/dev/null; } \
    || echo "could not install chromium: the console's browser tests will be skipped" >&2
}
# Only where a JDK is: the jars serve the Java example, and without java the test skips anyway.
ensure_java_parts() {
  command -v javac >/dev/null 2>&1 || return 0
  [ -e /usr/share/java/mariadb-java-client.jar ] && [ -e /usr/share/java/javax.json.jar ] && return 0
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "no apt-get: the Java example test will be skipped (it needs MariaDB Connector/J and JSON-P)" >&2
    return 0
  fi
  echo "installing libmariadb-java and libjsonp-java for the Java example of docs/procedures.md"
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 $SUDO apt-get install -y -qq \
      --no-install-recommends libmariadb-java libjsonp-java >/dev/null; } \
    || echo "could not install libmariadb-java and libjsonp-java: the Java example test will be skipped" >&2
}
# The Go and PHP examples of docs/procedures.md run in the same test, with Debian's toolchains and
# drivers: Go builds against golang-github-go-sql-driver-mysql-dev's source when the Go module proxy is
# out of reach, so nothing is fetched from outside the package registries.
ensure_go_and_php() {
  command -v go >/dev/null 2>&1 && [ -e /usr/share/gocode/src/github.com/go-sql-driver/mysql/go.mod ] \
    && command -v php >/dev/null 2>&1 && php -m 2>/dev/null | grep -qx pdo_mysql && return 0
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "no apt-get: the Go and PHP example tests will be skipped" >&2
    return 0
  fi
  echo "installing golang-go, the Go MySQL driver, php-cli and php-mysql for the examples of docs/procedures.md"
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 $SUDO apt-get install -y -qq \
      --no-install-recommends golang-go golang-github-go-sql-driver-mysql-dev php-cli php-mysql >/dev/null; } \
    || echo "could not install Go and PHP: their example tests will be skipped" >&2
}
# Django's MySQL backend drives mysqlclient, a C extension built by pip (the `test` extra) against the
# MariaDB client library: its headers and pkg-config must be here before `pip install` of that extra.
ensure_mysqlclient_build_parts() {
  [ -e /usr/include/mariadb/mysql.h ] && command -v pkg-config >/dev/null 2>&1 && return 0
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "no apt-get: install the MariaDB/MySQL client headers and pkg-config for mysqlclient" >&2
    return 0
  fi
  echo "installing libmariadb-dev and pkg-config for mysqlclient (the Django tests)"
  { $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq && DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 \
      $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
      libmariadb-dev pkg-config >/dev/null; } \
    || echo "could not install libmariadb-dev: pip cannot build mysqlclient" >&2
}
# bench/procedure_costs.py counts the server's instructions per procedure call under valgrind's
# callgrind (its tiny run is in `make test`).
ensure_valgrind() {
  command -v valgrind >/dev/null 2>&1 && command -v callgrind_control >/dev/null 2>&1 && return 0
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "no valgrind and no apt-get: bench/procedure_costs.py gives server CPU only" >&2
    return 0
  fi
  echo "installing valgrind from Debian's packages for bench/procedure_costs.py"
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 $SUDO apt-get install -y -qq \
      --no-install-recommends valgrind >/dev/null; } \
    || echo "could not install valgrind: bench/procedure_costs.py gives server CPU only" >&2
}
# apt-get install PACKAGES for WHAT, or say that WHAT is skipped without them.
apt_install_for() {
  local what="$1"
  shift
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "no apt-get to install $*: $what will be skipped" >&2
    return 0
  fi
  echo "installing $* from Debian's packages for $what"
  { $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq && DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 \
      $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "$@" >/dev/null; } \
    || echo "could not install $*: $what will be skipped" >&2
}
# Debian's prometheus package carries promtool, which `make test` runs on deploy/prometheus/. Only
# promtool is wanted: the Prometheus server the package enables (listening on every interface, port
# 9090, with no authentication) is stopped and disabled where systemd runs it.
ensure_promtool() {
  command -v promtool >/dev/null 2>&1 && return 0
  apt_install_for "the alerting rules' tests" prometheus
  if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    $SUDO systemctl disable --now prometheus.service >/dev/null 2>&1 || true
  fi
}
# bench/db_profile.py records the server with perf (Debian's linux-perf) to say where its CPU goes.
ensure_perf() {
  command -v perf >/dev/null 2>&1 && return 0
  apt_install_for "bench/db_profile.py" linux-perf
}
# bench/faults.py puts each Galera node in a network namespace of its own (ip netns) to cut links.
ensure_iproute2() {
  command -v ip >/dev/null 2>&1 && return 0
  command -v apt-get >/dev/null 2>&1 || { echo "no ip (iproute2): the fault runs will be skipped" >&2; return 0; }
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 $SUDO apt-get install -y -qq \
      -o DPkg::Lock::Timeout=600 --no-install-recommends iproute2 >/dev/null; } \
    || echo "could not install iproute2: the fault runs will be skipped" >&2
}
# The Galera parts, beside a MariaDB server only (Galera is MariaDB's).
ensure_cluster_parts() {
  have_cluster_parts && return 0
  command -v apt-get >/dev/null 2>&1 && command -v mariadbd >/dev/null 2>&1 || return 0
  echo "installing galera-4, mariadb-backup and socat for the cluster tests"
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 $SUDO apt-get install -y -qq \
      --no-install-recommends galera-4 mariadb-backup socat >/dev/null; } \
    || echo "could not install the Galera parts: the cluster tests will be skipped" >&2
}
ensure_database() {
  have_server && have_client && return 0
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "no mariadbd/mysqld on PATH and no apt-get: install MariaDB 10.6+ or MySQL 8.0+ server and client" >&2
    exit 1
  fi
  echo "installing mariadb-server and mariadb-client from Debian's packages"
  $SUDO apt-get update -qq
  # A system service the package may start is left alone: nothing here connects to it.
  DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 $SUDO apt-get install -y -qq --no-install-recommends \
    mariadb-server mariadb-client >/dev/null
  have_server && have_client
}
ensure_database
if [ "$MODE" = test ]; then
  # Before the venv's `pip install` of the `test` extra (`make test` runs this first); the demo's
  # venv installs the package alone.
  ensure_mysqlclient_build_parts
  ensure_redis
  ensure_rabbitmq
  ensure_chromium
  ensure_java_parts
  ensure_go_and_php
  ensure_valgrind
  ensure_perf
  ensure_promtool
  ensure_cluster_parts
  ensure_iproute2
fi

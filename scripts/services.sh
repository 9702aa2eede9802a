#!/usr/bin/env bash
# Starts the local PostgreSQL and Redis the test suite uses, if they are not running.
# Installs them from Debian's packages when missing (needs root, as on CI).
set -euo pipefail

if ! command -v pg_ctlcluster >/dev/null 2>&1 || ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql redis-server >/dev/null
  else
    echo "PostgreSQL and Redis are needed: install the postgresql and redis-server packages" >&2
    exit 1
  fi
fi

if ! pg_isready -q -h 127.0.0.1 -p 5432; then
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n 1)" main start
  for _ in $(seq 1 50); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 0.2; done
fi
# The tests use database "test" as user postgres over loopback.
if ! psql -h 127.0.0.1 -U postgres -d test -Atc 'select 1' >/dev/null 2>&1; then
  psql -h 127.0.0.1 -U postgres -d postgres -c 'CREATE DATABASE test' >/dev/null \
    || su postgres -c "psql -c 'CREATE DATABASE test'" >/dev/null
fi

if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null
  for _ in $(seq 1 50); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 0.2; done
fi
echo "services: PostgreSQL and Redis are up on 127.0.0.1"

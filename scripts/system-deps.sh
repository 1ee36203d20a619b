#!/usr/bin/env bash
# What the project needs from the machine beyond Node and npm, installed and started by the project
# itself so that the README's two commands work on a fresh Debian machine:
#   - Chromium: the dashboard's browser tests drive Debian's build (playwright-core downloads none);
#   - bubblewrap: the sandbox that `execute` runs commands in;
#   - PostgreSQL on 127.0.0.1:5432 (trust auth): the conformance suite and the multi-process tests.
# Each step is skipped when the thing is already there, so a second run costs nothing.
set -euo pipefail

missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v bwrap >/dev/null || missing+=(bubblewrap)
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "system-deps: missing ${missing[*]}; install them with your package manager (Debian: apt-get install ${missing[*]})" >&2
    exit 1
  fi
  echo "system-deps: installing ${missing[*]} from Debian" >&2
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
fi

if [ "${1:-}" = "--postgres" ] && ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  echo "system-deps: starting PostgreSQL" >&2
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
  pg_isready -q -h 127.0.0.1 -p 5432 || { echo "system-deps: PostgreSQL did not start" >&2; exit 1; }
fi

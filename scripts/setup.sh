#!/usr/bin/env bash
# Set up gossamer from nothing on Debian/Ubuntu with Python >= 3.11:
# Debian packages (servers used by tests and benchmarks, and the headless Chromium with its
# chromedriver that the browser tests drive: gossamer/testweb/_browser.py; OpenSSH's sshd and
# rsync for the tests of workers on other machines: tests/e2e/_sshd.py), then a .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
DEB_PACKAGES="redis-server redis-sentinel nginx-light wrk tinyproxy chromium chromium-driver openssh-server rsync"
missing=""
for p in $DEB_PACKAGES; do
  # "install ok installed": `dpkg -s` alone also succeeds for a removed package whose config
  # files are left ("deinstall ok config-files")
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# parse/_simhash.pyx and graph/_hyperball.pyx are compiled as gossamer is installed (setup.py):
# a C compiler and the headers of the Python the .venv is made from (Debian's python3:
# python3-dev)
command -v gcc >/dev/null 2>&1 || missing="$missing gcc"
"$PY" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
  || missing="$missing python3-dev"
if [ -n "$missing" ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "setup: installing Debian packages:$missing"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
  # The packages may start system services; gossamer never uses them (tests start their own).
  for svc in redis-server redis-sentinel nginx tinyproxy ssh; do
    $SUDO systemctl disable --now "$svc" >/dev/null 2>&1 || $SUDO service "$svc" stop >/dev/null 2>&1 || true
  done
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv || { echo "setup: python venv failed; on Debian: apt-get install python3-venv" >&2; exit 1; }
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[dev]'
# pywb, the replay tool the CDX index tests serve crawls with (tests/e2e/_pywb.py), in its own
# virtualenv: pywb 2.10 pins redis==2.10.6, which gossamer's redis>=5 excludes.
if [ ! -x .venv-pywb/bin/wayback ]; then
  "$PY" -m venv .venv-pywb
  .venv-pywb/bin/python -m pip install -q --upgrade pip
  .venv-pywb/bin/python -m pip install -q 'pywb==2.10.0'
fi
# An editable install leaves gossamer's own modules uncompiled, and with PYTHONDONTWRITEBYTECODE
# (set on some machines) every process would compile them again at start (~60 ms each).
.venv/bin/python -m compileall -q src/gossamer >/dev/null
echo "setup: done (.venv ready; run .venv/bin/gossamer --help)"

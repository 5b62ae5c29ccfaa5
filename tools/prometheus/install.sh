#!/usr/bin/env bash
# Finds or installs Debian's prometheus package for the tests of the alert rules (promtool) and
# the end-to-end test with a real Prometheus. Prints `promtool=PATH` and `prometheus=PATH`.
#   1. both on PATH (or $MDS_PROMTOOL and $MDS_PROMETHEUS): used as they are;
#   2. else a copy unpacked earlier into <cache>/prometheus-deb/ (no root needed);
#   3. else `apt-get download prometheus` (as root, `apt-get update` first if the lists are
#      empty) unpacked there with dpkg-deb.
# <cache> is $MDS_TOOLS_CACHE or ${XDG_CACHE_HOME:-$HOME/.cache}/mds/tools.
# Exit status 3: neither found nor installable (not a Debian-like machine).
set -euo pipefail

promtool=${MDS_PROMTOOL:-$(command -v promtool || true)}
prometheus=${MDS_PROMETHEUS:-$(command -v prometheus || true)}
if [ -n "$promtool" ] && [ -n "$prometheus" ]; then
  echo "promtool=$promtool"
  echo "prometheus=$prometheus"
  exit 0
fi

cache=${MDS_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mds/tools}
dir=$cache/prometheus-deb
if [ ! -e "$dir/.complete" ]; then
  if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1; then
    echo "error: promtool and prometheus are not on PATH and apt-get/dpkg-deb are missing;" \
      "install Prometheus 2.x and set MDS_PROMTOOL and MDS_PROMETHEUS" >&2
    exit 3
  fi
  mkdir -p "$cache"
  tmp=$(mktemp -d "$cache/.prometheus-deb.XXXXXX")
  (
    cd "$tmp"
    if ! apt-get download prometheus >&2; then
      [ "$(id -u)" = 0 ] && apt-get update >&2
      apt-get download prometheus >&2
    fi
    dpkg-deb -x prometheus_*.deb root
  )
  touch "$tmp/.complete"
  rm -rf "$dir"
  mv "$tmp" "$dir"
fi
echo "promtool=${MDS_PROMTOOL:-$dir/root/usr/bin/promtool}"
echo "prometheus=${MDS_PROMETHEUS:-$dir/root/usr/bin/prometheus}"

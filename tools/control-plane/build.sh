#!/usr/bin/env bash
# Builds the test control plane from the pinned Go modules into a cache keyed by version:
#   <cache>/<k8s>-<etcd>/{kube-apiserver,kubectl,etcd}   (build from source, minutes when cold)
#   <cache>/kueue-<kueue>/workloads.yaml                 (Kueue's own Workload CRD, from its module)
# where <cache> is $MDS_CONTROL_PLANE_CACHE or ${XDG_CACHE_HOME:-$HOME/.cache}/mds/control-plane.
# A finished folder is reused as is, so a second run costs nothing and needs no Go.
#
# Usage: build.sh [all|binaries|kueue-crd]   (default: all)
# Prints `name=path` lines on stdout for what it made sure of (bin_dir, kueue_workload_crd);
# progress goes to stderr. Exit status 3: Go is needed and missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
what=${1:-all}
case $what in all | binaries | kueue-crd) ;; *)
  echo "usage: $0 [all|binaries|kueue-crd]" >&2
  exit 2
  ;;
esac

cache=${MDS_CONTROL_PLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mds/control-plane}
bin_dir=$cache/$K8S_VERSION-$ETCD_VERSION
kueue_dir=$cache/kueue-$KUEUE_VERSION
# A folder counts only once its marker exists: an interrupted build leaves no half-made folder that
# passes for a finished one.
binaries_ready() { [ -e "$bin_dir/.complete" ]; }
kueue_ready() { [ -e "$kueue_dir/.complete" ]; }

need_go() {
  if ! command -v go >/dev/null 2>&1; then
    cat >&2 <<EOF
error: Go is needed to build the test control plane (kube-apiserver $K8S_VERSION, etcd $ETCD_VERSION,
Kueue $KUEUE_VERSION CRDs) and \`go\` is not on PATH. Install Go (the go line of
$here/kube/go.mod or newer), or point KUBEBUILDER_ASSETS at a folder holding kube-apiserver and etcd.
EOF
    exit 3
  fi
}

# Ours, not the user's: the committed go.sum pins every module, so nothing may change it.
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=readonly -trimpath -buildvcs=false"

build_binaries() {
  binaries_ready && return
  need_go
  local started tmp minor ldflags
  started=$(date +%s)
  tmp=$(mktemp -d "$cache/.build-binaries.XXXXXX")
  minor=$(cut -d. -f2 <<<"$K8S_VERSION")
  # What `kubectl version` and the API server's /version report; without it they say v0.0.0-master.
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=v$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean"
  done
  echo "building kube-apiserver and kubectl v$K8S_VERSION (a cold build takes many minutes)" >&2
  (cd "$here/kube" && go build -ldflags "$ldflags" -o "$tmp/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl)
  echo "building etcd v$ETCD_VERSION" >&2
  (cd "$here/etcd" && go build -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
  touch "$tmp/.complete"
  rm -rf "$bin_dir"
  mv "$tmp" "$bin_dir"
  echo "built $bin_dir in $(($(date +%s) - started)) s" >&2
}

extract_kueue_crd() {
  kueue_ready && return
  need_go
  local tmp module_dir crd
  tmp=$(mktemp -d "$cache/.build-kueue.XXXXXX")
  # `go mod download` checks the zip against the committed go.sum before we read a byte of it.
  module_dir=$(cd "$here/kueue" && go mod download -json sigs.k8s.io/kueue |
    sed -n 's/.*"Dir": "\([^"]*\)".*/\1/p')
  crd=$module_dir/config/components/crd/bases/kueue.x-k8s.io_workloads.yaml
  if [ ! -f "$crd" ]; then
    echo "error: sigs.k8s.io/kueue@v$KUEUE_VERSION has no $crd" >&2
    exit 1
  fi
  cp "$crd" "$tmp/workloads.yaml"
  chmod 0644 "$tmp/workloads.yaml"
  touch "$tmp/.complete"
  rm -rf "$kueue_dir"
  mv "$tmp" "$kueue_dir"
}

mkdir -p "$cache"
# One builder at a time: test binaries of one `cargo test` may all find the cache cold.
exec 9>"$cache/.lock"
flock 9
case $what in
all)
  build_binaries
  extract_kueue_crd
  ;;
binaries) build_binaries ;;
kueue-crd) extract_kueue_crd ;;
esac
[ "$what" = kueue-crd ] || echo "bin_dir=$bin_dir"
[ "$what" = binaries ] || echo "kueue_workload_crd=$kueue_dir/workloads.yaml"

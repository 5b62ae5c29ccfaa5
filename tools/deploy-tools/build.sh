#!/usr/bin/env bash
# Builds the pinned tools that check deploy/ into a cache keyed by version:
#   <cache>/helm-<version>/helm                                   (from source, minutes when cold)
#   <cache>/cert-manager-<version>/{certificates,issuers}.yaml    (cert-manager's own CRDs)
# where <cache> is $MDS_TOOLS_CACHE or ${XDG_CACHE_HOME:-$HOME/.cache}/mds/tools.
# A finished folder is reused as is, so a second run costs nothing and needs no Go.
#
# Usage: build.sh [all|helm|cert-manager-crds]   (default: all)
# Prints `name=path` lines on stdout (helm, cert_manager_crds); progress goes to stderr.
# Exit status 3: Go is needed and missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
what=${1:-all}
case $what in all | helm | cert-manager-crds) ;; *)
  echo "usage: $0 [all|helm|cert-manager-crds]" >&2
  exit 2
  ;;
esac

cache=${MDS_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mds/tools}
helm_dir=$cache/helm-$HELM_VERSION
crds_dir=$cache/cert-manager-$CERT_MANAGER_VERSION

need_go() {
  if ! command -v go >/dev/null 2>&1; then
    cat >&2 <<MSG
error: Go is needed to build helm $HELM_VERSION and to read cert-manager $CERT_MANAGER_VERSION's CRDs,
and \`go\` is not on PATH. Install Go (the go line of $here/helm/go.mod or newer).
MSG
    exit 3
  fi
}

# Ours, not the user's: the committed go.sum pins every module, so nothing may change it.
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-mod=readonly -trimpath -buildvcs=false"

build_helm() {
  # A folder counts only once its marker exists, so an interrupted build starts over.
  [ -e "$helm_dir/.complete" ] && return
  need_go
  local started tmp major pkg
  started=$(date +%s)
  tmp=$(mktemp -d "$cache/.build-helm.XXXXXX")
  major=${HELM_VERSION%%.*}
  pkg=helm.sh/helm/v$major
  echo "building helm v$HELM_VERSION (a cold build takes 5 to 10 minutes)" >&2
  # The version flags make `helm version` report the release instead of `main`.
  (cd "$here/helm" && go build -o "$tmp/helm" \
    -ldflags "-s -w -X $pkg/internal/version.version=v$HELM_VERSION -X $pkg/internal/version.gitTreeState=clean" \
    "$pkg/cmd/helm")
  touch "$tmp/.complete"
  rm -rf "$helm_dir"
  mv "$tmp" "$helm_dir"
  echo "built $helm_dir in $(($(date +%s) - started)) s" >&2
}

extract_cert_manager_crds() {
  [ -e "$crds_dir/.complete" ] && return
  need_go
  local tmp module_dir kind
  tmp=$(mktemp -d "$cache/.build-cert-manager.XXXXXX")
  # `go mod download` checks the zip against the committed go.sum before we read a byte of it.
  module_dir=$(cd "$here/cert-manager" && go mod download -json github.com/cert-manager/cert-manager |
    sed -n 's/.*"Dir": "\([^"]*\)".*/\1/p')
  for kind in certificates issuers; do
    if [ ! -f "$module_dir/deploy/crds/cert-manager.io_$kind.yaml" ]; then
      echo "error: cert-manager v$CERT_MANAGER_VERSION has no deploy/crds/cert-manager.io_$kind.yaml" >&2
      exit 1
    fi
    cp "$module_dir/deploy/crds/cert-manager.io_$kind.yaml" "$tmp/$kind.yaml"
    chmod 0644 "$tmp/$kind.yaml"
  done
  touch "$tmp/.complete"
  rm -rf "$crds_dir"
  mv "$tmp" "$crds_dir"
}

mkdir -p "$cache"
# One builder at a time: several test binaries may find the cache cold together.
exec 9>"$cache/.lock"
flock 9
case $what in
all)
  build_helm
  extract_cert_manager_crds
  ;;
helm) build_helm ;;
cert-manager-crds) extract_cert_manager_crds ;;
esac
[ "$what" = cert-manager-crds ] || echo "helm=$helm_dir/helm"
[ "$what" = helm ] || echo "cert_manager_crds=$crds_dir"

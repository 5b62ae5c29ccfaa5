#!/usr/bin/env bash
# Regenerates the committed go.mod/go.sum of the three build modules from versions.env.
# Run it after changing a version; commit what it writes. Needs Go and the Go module proxy.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod

# kube: kube-apiserver and kubectl from k8s.io/kubernetes. Its go.mod replaces every staging module
# (k8s.io/api, k8s.io/client-go, ...) with a folder of its own repository, which a dependent module
# cannot see; so this module replaces each one with its published v0.<minor>.<patch> release.
# The list is read from the proxy's go.mod, never kept by hand (1.36 added two staging modules).
kube_gomod=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" |
  sed -n 's/.*"GoMod": "\([^"]*\)".*/\1/p')
rm -f "$here/kube/go.mod" "$here/kube/go.sum"
mkdir -p "$here/kube"
cd "$here/kube"
go mod init mds.invalid/control-plane/kube
go mod edit -go="$(awk '$1=="go"{print $2}' "$kube_gomod")"
for d in $(awk '$1=="godebug" && NF==2 {print $2}' "$kube_gomod"); do go mod edit -godebug="$d"; done
for m in $(awk '$2=="=>" && $3 ~ /^\.\/staging\//{print $1}' "$kube_gomod"); do
  go mod edit -replace="$m=$m@v0.${K8S_VERSION#1.}"
done
go get -tool "k8s.io/kubernetes/cmd/kube-apiserver@v$K8S_VERSION"
go get -tool "k8s.io/kubernetes/cmd/kubectl@v$K8S_VERSION"

# etcd: its own module, so etcd's dependency versions do not move the apiserver's.
rm -f "$here/etcd/go.mod" "$here/etcd/go.sum"
mkdir -p "$here/etcd"
cd "$here/etcd"
go mod init mds.invalid/control-plane/etcd
# The lowest go line that fits; `go get` raises it to what the dependencies need.
go mod edit -go=1.24.0
go get -tool "go.etcd.io/etcd/server/v3@v$ETCD_VERSION"

# kueue: only pinned (go.sum) so the build can take the Workload CRD from the module's own files.
rm -f "$here/kueue/go.mod" "$here/kueue/go.sum"
mkdir -p "$here/kueue"
cd "$here/kueue"
go mod init mds.invalid/control-plane/kueue
go mod edit -go=1.24.0
go mod edit -require="sigs.k8s.io/kueue@v$KUEUE_VERSION"
go mod download sigs.k8s.io/kueue

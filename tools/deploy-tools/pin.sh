#!/usr/bin/env bash
# Regenerates the committed go.mod/go.sum of the two modules from versions.env.
# Run it after changing a version; commit what it writes. Needs Go and the Go module proxy.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod

# helm: the helm command from its own module.
major=${HELM_VERSION%%.*}
helm_gomod=$(go mod download -json "helm.sh/helm/v$major@v$HELM_VERSION" |
  sed -n 's/.*"GoMod": "\([^"]*\)".*/\1/p')
mkdir -p "$here/helm"
cd "$here/helm"
rm -f go.mod go.sum
go mod init mds.invalid/deploy-tools/helm
# Helm's own go line: `go mod init` writes the local Go version, which an older Go refuses.
go mod edit -go="$(awk '$1=="go"{print $2}' "$helm_gomod")"
go get -tool "helm.sh/helm/v$major/cmd/helm@v$HELM_VERSION"

# cert-manager: only pinned (go.sum), so the build can take the CRDs from the module's own files.
mkdir -p "$here/cert-manager"
cd "$here/cert-manager"
rm -f go.mod go.sum
go mod init mds.invalid/deploy-tools/cert-manager
go mod edit -go=1.24.0
go mod edit -require="github.com/cert-manager/cert-manager@v$CERT_MANAGER_VERSION"
go mod download github.com/cert-manager/cert-manager

module mds.invalid/deploy-tools/cert-manager

go 1.24.0

require github.com/cert-manager/cert-manager v1.21.2

module mds.invalid/control-plane/kueue

go 1.24.0

require sigs.k8s.io/kueue v0.17.0

//go:build tools

// Package helm pins the Helm 3 CLI that lints, renders and installs charts/poolsmith in
// the tests. It is its own module, built from the Go module proxy like the control plane,
// so the main go.mod never requires helm.sh/helm.
package helm

import (
	_ "helm.sh/helm/v3/cmd/helm"
)

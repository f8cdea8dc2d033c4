//go:build tools

// Package etcd pins the etcd server that backs the test control plane. It is a module of
// its own because k8s.io/kubernetes v1.37 requires the etcd v3.7 libraries, which would
// lift the server past the v3.6 release line the API server is tested against.
package etcd

import (
	_ "go.etcd.io/etcd/server/v3"
)

// Package crd embeds Poolsmith's generated CRDs, so the CLI and the controller validate
// Baselines and WorkloadClasses in-process exactly as the API server does.
package crd

import "embed"

// Bases holds bases/*.yaml, the CRDs `make manifests` generates.
//
//go:embed bases/*.yaml
var Bases embed.FS

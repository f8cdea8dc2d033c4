// Package lockdown holds the checks every shipped install method must pass (config/default
// with kustomize, charts/poolsmith with helm): the manager runs as non-root with a
// read-only root filesystem, no privilege escalation and no capabilities, requests cpu
// and memory, never runs an image tagged latest; no Role or ClusterRole grants Secrets or
// a wildcard.
package lockdown

// Package e2e holds watch's end-to-end test with a real Prometheus
// (Debian's prometheus package): go test -tags prometheus ./watch/e2e,
// which .ci/prometheus runs after installing the package when missing.
package e2e

"""Running scenarios: plan, sandboxed invocations, the receiver and the backup check."""

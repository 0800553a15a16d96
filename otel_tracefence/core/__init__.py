"""The contract and its utilities: the normalized step and the plan, reason codes, canonical JSON, the
plan's protobuf schema, configuration and self-telemetry. Imports nothing else of the package."""

"""The agent-side helpers: instrumentation helpers that make or label tool spans (``instrument``) and the
replay guard (``replay``)."""

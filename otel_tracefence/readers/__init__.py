"""Reading inputs: rows (CSV, JSON, NDJSON) to steps, format detection, and the input errors every reader reports."""

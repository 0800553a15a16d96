"""``tracefence serve``: the collector-side OTLP service (receivers, the one Export path, forwarding, workers, the review API)."""

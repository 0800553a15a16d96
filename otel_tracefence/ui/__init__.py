"""``tracefence ui``: the review page and the trace inspector, a Starlette app served by uvicorn.

:func:`create_app` builds the app for any review store (:func:`app_for`: as configured); :func:`open_store` opens the one it shows.
"""

from otel_tracefence.ui.app import app_for, create_app
from otel_tracefence.ui.queue_source import open_store

__all__ = ["app_for", "create_app", "open_store"]

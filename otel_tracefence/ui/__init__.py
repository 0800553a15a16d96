"""``tracefence ui``: the review page and the trace inspector, a Starlette app served by uvicorn.

:func:`create_app` builds the app for any review store; :func:`open_store` opens the one it shows.
"""

from otel_tracefence.ui.app import create_app
from otel_tracefence.ui.store import open_store

__all__ = ["create_app", "open_store"]

"""The review page and the trace inspector, as one Starlette app (``tracefence ui``).

Routes:

* ``GET /``: the queue, newest first; ``state`` (``open``, ``resolved``, ``all``),
  ``class`` (a replay class), ``service``, ``page_size`` (1..200, default 50) and
  ``page_token`` (the store's) in the query string.
* ``GET /items/{trace_id}``: one item: its plan, its history (when the store keeps
  one), a link to the trace in a backend, and the resolve form.
* ``POST /items/{trace_id}/resolve``: form fields ``resolved_by`` (required; remembered for the session),
  ``verdict`` (``found_once``, ``absent``, ``found_twice``, ``undetermined`` or empty), ``note`` and ``csrf_token``.
* ``GET /inspect``: the inspector; ``POST /inspect/plan`` plans the request body
  (the file's bytes) as ``tracefence plan`` does and answers JSON
  ``{"output", "messages", "rejected", "html"}``; ``GET /inspect/sample``: the sample.
* ``GET /static/...``: the stylesheet and the script (no CDN).

Every POST is checked by :class:`~otel_tracefence.ui.security.SessionGuard` (origin and
CSRF token; 403 when refused). With a review token configured, every page but
``/login`` needs a session signed in with it (``POST /login``, ``POST /logout``):
a GET goes to the sign-in page, anything else is refused with 403.
"""

from __future__ import annotations

import functools
import logging
import re
import sqlite3
import traceback
import urllib.parse
from pathlib import Path
from typing import Any, Awaitable, Callable, Mapping, Sequence

import anyio
import anyio.to_thread
import jinja2
from pydantic import ValidationError
from google.protobuf.timestamp_pb2 import Timestamp
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from otel_tracefence._proto.tracefence.v1 import tracefence_pb2 as pb
from otel_tracefence.core.config import TraceFenceConfig, UiSettings, describe
from otel_tracefence.core.model import ReplayClass
from otel_tracefence.review.events import ReviewStore
from otel_tracefence.review.store import ReviewStoreError
from otel_tracefence.review.verdicts import Verdict
from otel_tracefence.core.schema import plan_to_proto
from otel_tracefence.ui.explain import conflict_pairs, reason_key
from otel_tracefence.ui import queue_view
from otel_tracefence.ui.inspector import INPUT_FORMATS, TooManySteps, inspect
from otel_tracefence.ui.security import CSRF_FIELD, CSRF_HEADER, Refused, SessionGuard, served_hosts
from otel_tracefence.ui.waterfall import duration_text, step_times, trace_links, waterfall

_log = logging.getLogger("otel_tracefence.ui")
HERE = Path(__file__).resolve().parent
SAMPLE = HERE / "static" / "sample.ndjson"
STATES = {"open": pb.REVIEW_STATE_OPEN, "resolved": pb.REVIEW_STATE_RESOLVED, "all": None}
CLASSES = tuple(c.value for c in ReplayClass)
DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE = 50, 200
MAX_FORM_BYTES = 64 * 1024
DEFAULT_MAX_INSPECT_BYTES = UiSettings().max_inspect_bytes
INSPECTIONS_AT_ONCE = 2  # inputs planned at the same time; more wait their turn
HELD = (pb.DECISION_REVIEW, pb.DECISION_CONFLICT)
VERDICTS = {v.value: v.value.replace("_", " ") for v in Verdict}  # found_once -> "found once"
ORDERS = ("newest", "oldest")  # the queue's order by last update: newest first (the default) or oldest first
BULK_MAX = 200  # items one bulk resolve takes at most
REMEMBERED_REVIEWERS = 10_000  # sessions whose reviewer name the form is filled with; the oldest is forgotten past it
SECURITY_HEADERS = {
    # Only our own script and stylesheet; no framing; forms post only here (OWASP secure headers).
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


def enum_label(value: int, enum_type: Any) -> str:
    """A ``tracefence.v1`` enum value for people: ``DECISION_REVIEW`` -> ``review``, ``-`` for ``*_UNSPECIFIED``.

    The prefix is the enum's name in upper snake case, as buf's enum rules require.
    """
    prefix = re.sub(r"(?<!^)(?=[A-Z])", "_", enum_type.DESCRIPTOR.name).upper() + "_"
    name = enum_type.Name(value)
    return "-" if name.endswith("_UNSPECIFIED") else name.removeprefix(prefix).lower()


def rfc3339(time_ns: int) -> str:
    """Nanoseconds since the Unix epoch as RFC 3339 UTC text, as protobuf's JSON mapping writes a Timestamp."""
    ts = Timestamp()
    ts.FromNanoseconds(time_ns)
    return ts.ToJsonString()


class _Problem(Exception):
    """A request the page cannot take: ``status_code`` and a line for a person."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(message)
        self.status_code, self.message = status_code, message


def local_path(target: str) -> str:
    """``target`` when it is a path of this site (``/...``, not ``//host`` nor ``/\\host``), else ``/``: where a
    sign-in may send the browser back to, never another site."""
    if target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/"


def byte_size(n: int) -> str:
    """``16777216`` -> ``16 MiB``; ``1500`` -> ``1500 bytes`` (binary units, whole ones only)."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"


def create_app(
    store: ReviewStore | None,
    *,
    review_token: str = "",
    trace_url_template: str = "",
    trace_link_templates: Mapping[str, str] | None = None,
    config: TraceFenceConfig | None = None,
    max_inspect_bytes: int = DEFAULT_MAX_INSPECT_BYTES,
    allowed_hosts: Sequence[str] | None = None,
    session_secret: bytes | None = None,
) -> Starlette:
    """The page as an ASGI app, to serve with uvicorn (``tracefence ui``) or beside another server.

    ``store``: the review queue shown (any :class:`~otel_tracefence.review.events.ReviewStore`); ``None``
    serves the inspector alone. ``review_token``: when set, every page needs a session signed in with it. ``trace_url_template``:
    a link per trace, ``{trace_id}`` replaced, e.g. ``http://localhost:16686/trace/{trace_id}`` (Jaeger); ``trace_link_templates``:
    more links, by label (``{"Tempo": "http://localhost:3000/explore?...{trace_id}..."}``, ``ui.trace_links``).
    ``config``: the planning configuration of the inspector (tool rules...; default: the defaults).
    ``max_inspect_bytes``: largest inspector input; larger is refused with 413. ``allowed_hosts``: the
    ``Host`` names served (Starlette's ``TrustedHostMiddleware``, against DNS rebinding); ``None``: any.
    ``session_secret``: the HMAC key of CSRF tokens and sign-ins (default: random per app). The store is not closed by the app.
    Raises :class:`ValueError` for a ``trace_url_template`` that ``ui.trace_url_template`` would refuse.
    """
    try:
        UiSettings(trace_url_template=trace_url_template, trace_links=dict(trace_link_templates or {}))  # the configuration's own rules
    except ValidationError as exc:
        raise ValueError(f"trace_url_template: {describe(exc)}") from None
    config = config or TraceFenceConfig()
    links = [("tracing backend", trace_url_template), *(trace_link_templates or {}).items()]
    templates = Jinja2Templates(env=jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True))
    templates.env.filters["label"] = enum_label
    templates.env.filters["timestamp"] = rfc3339
    templates.env.filters["duration"] = duration_text
    templates.env.globals.update(pb=pb, HELD=HELD)
    guard = SessionGuard(review_token, session_secret)
    reviewers: dict[str, str] = {}  # session id -> the name its last resolution gave (memory only, this process)
    planning = anyio.CapacityLimiter(INSPECTIONS_AT_ONCE)  # planning a large file holds a core and its memory

    def page(request: Request, name: str, context: dict[str, Any], status_code: int = 200) -> Response:
        session_id, new = guard.session(request)
        context = {
            **context,
            "csrf_token": guard.token(session_id),
            "sign_out": bool(review_token) and guard.signed_in(request),
            "has_store": store is not None,
        }
        response = templates.TemplateResponse(request, name, context, status_code=status_code, headers=SECURITY_HEADERS)
        if new and request.method == "GET":  # never on a refused POST: a cross-site form must not replace the session
            guard.set_session(request, response, session_id)
        return response

    def signed_in_only(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        """``handler`` for a signed-in session only, when a review token is configured: a GET goes to the
        sign-in page (and back), anything else is refused with 403."""

        @functools.wraps(handler)
        async def checked(request: Request) -> Response:
            if guard.signed_in(request):
                return await handler(request)
            if request.method == "GET":
                back = request.url.path + (f"?{request.url.query}" if request.url.query else "")
                return RedirectResponse("/login?" + urllib.parse.urlencode({"next": back}), status_code=303)
            message = "refused: sign in with the review token first (a review token is configured)"
            _log.warning("%s %s %s", request.method, request.url.path, message)
            if request.url.path.startswith("/inspect/"):
                return JSONResponse({"error": message}, status_code=403)
            return problem(request, 403, message)

        return checked

    async def small_form(request: Request) -> FormData:
        """The request's form, at most :data:`MAX_FORM_BYTES`; raises :class:`_Problem` (411, 413)."""
        length = request.headers.get("content-length", "")
        if not length.isdigit():
            raise _Problem(411, "the form must say its length (Content-Length)")
        if int(length) > MAX_FORM_BYTES:
            raise _Problem(413, f"the form is larger than {byte_size(MAX_FORM_BYTES)}: shorten the note")
        return await request.form(max_files=0, max_fields=10)

    async def checked_form(request: Request) -> FormData:
        """:func:`small_form`, posted from this page's own origin with this session's CSRF token; raises
        :class:`_Problem` or :class:`~otel_tracefence.ui.security.Refused`."""
        form = await small_form(request)
        guard.check_post(request, str(form.get(CSRF_FIELD, "")))
        return form

    def problem(request: Request, status_code: int, message: str) -> Response:
        return page(request, "error.html", {"message": message, "status": status_code}, status_code)

    async def queue(request: Request) -> Response:
        if store is None:
            return RedirectResponse("/inspect", status_code=303)
        q = request.query_params
        state, cls, service = q.get("state", "open").strip().lower(), q.get("class", "").strip().lower(), q.get("service", "").strip()
        if state not in STATES:
            return problem(request, 400, f"state {state!r}: give one of {', '.join(STATES)}")
        if cls and cls not in CLASSES:
            return problem(request, 400, f"class {cls!r}: give one of {', '.join(CLASSES)}")
        try:
            page_size = int(q.get("page_size", DEFAULT_PAGE_SIZE))
        except ValueError:
            page_size = 0
        if not 1 <= page_size <= MAX_PAGE_SIZE:
            return problem(request, 400, f"page_size: give a whole number from 1 to {MAX_PAGE_SIZE}")
        order = q.get("order", "newest").strip().lower()
        if order not in ORDERS:
            return problem(request, 400, f"order {order[:20]!r}: give newest or oldest")
        text = q.get("q", "").strip()
        listed = functools.partial(
            store.list, state=STATES[state], replay_classes=[ReplayClass(cls)] if cls else [], service_name=service or None, oldest_first=order == "oldest"
        )  # fmt: skip
        found = None
        try:
            if text:  # a search reads the queue page by page (bounded): its matches are one page
                found = await run_in_threadpool(queue_view.search, listed, text, page_size)
                items, next_token = found.items, ""
            else:
                items, next_token = await run_in_threadpool(listed, page_size=page_size, page_token=q.get("page_token", ""))
        except ValueError as exc:  # a page token from other filters or another store
            return problem(request, 400, f"{exc}; start again from the first page")
        filters = {"state": state, "class": cls, "service": service, "q": text, "order": order, "page_size": page_size}
        rows = [queue_view.row(i) for i in items]
        class_counts, reason_counts = queue_view.counts(rows)
        kept = {k: v for k, v in filters.items() if v and not (k == "page_size" and v == DEFAULT_PAGE_SIZE) and not (k == "order" and v == "newest")}
        return page(
            request,
            "queue.html",
            {
                "items": items,
                "rows": rows,
                "found": found,
                "class_counts": class_counts,
                "reason_counts": reason_counts,
                "filters": filters,
                "states": tuple(STATES),
                "classes": CLASSES,
                "first_url": "/?" + urllib.parse.urlencode(kept),
                "next_url": "/?" + urllib.parse.urlencode({**kept, "page_token": next_token}) if next_token else "",
                "paged": bool(q.get("page_token")),
                "orders": ORDERS,
                "verdicts": VERDICTS,
                "reviewer": reviewers.get(guard.session(request)[0], ""),
                "bulk_resolved": q.get("resolved", ""),
                "bulk_max": BULK_MAX,
            },
        )

    async def item_page(request: Request) -> Response:
        if store is None:
            return problem(request, 404, "no review queue is served here")
        trace_id = request.path_params["trace_id"]
        item = await run_in_threadpool(store.get, trace_id)
        if item is None:
            return problem(request, 404, f"no review item for trace id {shown_id(trace_id)}")
        history = await run_in_threadpool(store.history, trace_id) if hasattr(store, "history") else None
        kept = await run_in_threadpool(store.spans, trace_id) if hasattr(store, "spans") else None
        times = step_times(kept)
        return page(
            request,
            "item.html",
            {"item": item, "plan": item.plan, "history": history, "verdicts": VERDICTS, "reviewer": reviewers.get(guard.session(request)[0], ""), "reason_key": reason_key(item.plan), "pairs": conflict_pairs(item.plan, kept),
             "trace_links": trace_links(links, item.trace_id), "resolved": request.query_params.get("resolved") == "1", "trace": waterfall(kept, item.plan), "step_times": times, "span_of": {t.call_id: t.span_id for t in times}},
        )

    async def resolve(request: Request) -> Response:
        if store is None:
            return problem(request, 404, "no review queue is served here")
        trace_id = request.path_params["trace_id"]
        try:
            form = await checked_form(request)
        except _Problem as exc:
            return problem(request, exc.status_code, exc.message)
        except Refused as exc:
            _log.warning("resolve of trace %s refused: %s", trace_id, exc)
            return problem(request, 403, str(exc))
        resolved_by, note = str(form.get("resolved_by", "")).strip(), str(form.get("note", ""))
        verdict = str(form.get("verdict", ""))
        if not resolved_by:
            return problem(request, 400, "resolved by: say who resolved the item (a person or system)")
        if verdict and verdict not in VERDICTS:
            return problem(request, 400, f"verdict {verdict[:40]!r}: give one of {', '.join(VERDICTS)}, or none")
        try:
            await run_in_threadpool(functools.partial(store.resolve, trace_id, resolved_by=resolved_by, note=note, verdict=verdict))
        except KeyError:
            return problem(request, 404, f"no review item for trace id {shown_id(trace_id)}")
        remember_reviewer(request, resolved_by)
        _log.info("review item %s resolved by %s (verdict %s)", trace_id, resolved_by, verdict or "none")
        return RedirectResponse(f"/items/{urllib.parse.quote(trace_id, safe='')}?resolved=1", status_code=303)

    async def resolve_many(request: Request) -> Response:
        """Bulk resolve from the queue: the ticked ``trace_id`` fields (at most :data:`BULK_MAX`), one reviewer,
        note and verdict for all; each resolved as the item page's form does. Redirects to the queue, saying how many."""
        if store is None:
            return problem(request, 404, "no review queue is served here")
        try:
            length = request.headers.get("content-length", "")
            if not length.isdigit():
                raise _Problem(411, "the form must say its length (Content-Length)")
            if int(length) > MAX_FORM_BYTES + BULK_MAX * 80:
                raise _Problem(413, "the form is too large: tick fewer items or shorten the note")
            form = await request.form(max_files=0, max_fields=BULK_MAX + 10)
            guard.check_post(request, str(form.get(CSRF_FIELD, "")))
        except _Problem as exc:
            return problem(request, exc.status_code, exc.message)
        except Refused as exc:
            _log.warning("bulk resolve refused: %s", exc)
            return problem(request, 403, str(exc))
        trace_ids = list(dict.fromkeys(str(t) for t in form.getlist("trace_id")))
        resolved_by, note, verdict = str(form.get("resolved_by", "")).strip(), str(form.get("note", "")), str(form.get("verdict", ""))
        if not trace_ids:
            return problem(request, 400, "tick the items to resolve")
        if len(trace_ids) > BULK_MAX:
            return problem(request, 400, f"at most {BULK_MAX} items at once, not {len(trace_ids)}")
        if not resolved_by:
            return problem(request, 400, "resolved by: say who resolved the items (a person or system)")
        if verdict and verdict not in VERDICTS:
            return problem(request, 400, f"verdict {verdict[:40]!r}: give one of {', '.join(VERDICTS)}, or none")
        missing = []
        for trace_id in trace_ids:
            try:
                await run_in_threadpool(functools.partial(store.resolve, trace_id, resolved_by=resolved_by, note=note, verdict=verdict))
            except KeyError:
                missing.append(trace_id)
        remember_reviewer(request, resolved_by)
        done = len(trace_ids) - len(missing)
        _log.info("%d review items resolved by %s (verdict %s)", done, resolved_by, verdict or "none")
        if missing:
            return problem(request, 404, f"{done} resolved; no review item for {', '.join(shown_id(t, 40) for t in missing[:5])}")
        return RedirectResponse(f"/?resolved={done}", status_code=303)

    def remember_reviewer(request: Request, resolved_by: str) -> None:
        """The name a session last resolved with fills the forms again (at most REMEMBERED_REVIEWERS sessions)."""
        reviewers.pop(session_id := guard.session(request)[0], None)
        reviewers[session_id] = resolved_by
        if len(reviewers) > REMEMBERED_REVIEWERS:
            reviewers.pop(next(iter(reviewers)))

    async def login_page(request: Request) -> Response:
        if not review_token:
            return RedirectResponse("/", status_code=303)
        return page(request, "login.html", {"next": local_path(request.query_params.get("next", "/"))})

    async def login(request: Request) -> Response:
        try:
            form = await checked_form(request)
            response = RedirectResponse(local_path(str(form.get("next", "/"))), status_code=303)
            guard.sign_in(request, str(form.get("review_token", "")), response)
        except _Problem as exc:
            return problem(request, exc.status_code, exc.message)
        except Refused as exc:
            _log.warning("sign-in from %s refused: %s", request.client.host if request.client else "?", exc)
            return problem(request, 403, str(exc))
        return response

    async def logout(request: Request) -> Response:
        try:
            await checked_form(request)  # the CSRF check; a logout reads no field
        except _Problem as exc:
            return problem(request, exc.status_code, exc.message)
        except Refused as exc:
            return problem(request, 403, str(exc))
        response = RedirectResponse("/login" if review_token else "/", status_code=303)
        guard.sign_out(request, response)
        return response

    async def inspector(request: Request) -> Response:
        return page(request, "inspect.html", {"formats": INPUT_FORMATS, "max_bytes": byte_size(max_inspect_bytes)})

    async def sample(request: Request) -> Response:
        return FileResponse(SAMPLE, media_type="text/plain; charset=utf-8", headers={"content-disposition": 'inline; filename="sample.ndjson"'})

    async def plan(request: Request) -> Response:
        try:
            guard.check_post(request, request.headers.get(CSRF_HEADER, ""))
        except Refused as exc:
            return JSONResponse({"error": str(exc)}, status_code=403)
        too_large = JSONResponse({"error": f"the input is larger than {max_inspect_bytes} bytes (ui.max_inspect_bytes): nothing was planned"}, status_code=413)
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > max_inspect_bytes:
            return too_large
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_inspect_bytes:
                return too_large
            chunks.append(chunk)
        q = request.query_params
        plan_it = functools.partial(
            inspect, b"".join(chunks), config, input_format=q.get("input_format", "auto"), on_malformed=q.get("on_malformed", ""),
            max_steps=config.ui.max_inspect_steps,
        )
        try:
            result = await anyio.to_thread.run_sync(plan_it, limiter=planning)
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        except TooManySteps as exc:
            return JSONResponse({"error": str(exc)}, status_code=413)
        except Exception as exc:  # a defect: logged by type and code lines only, since its message may quote the input
            _log.error("inspector: planning failed with %s; the input is not logged\n%s", type(exc).__name__, "".join(traceback.format_tb(exc.__traceback__)))
            return JSONResponse({"error": f"planning failed ({type(exc).__name__}); nothing was planned"}, status_code=500)
        html = "" if result.rejected else templates.get_template("_plans.html").render(plans=[plan_to_proto(p) for p in result.plans], anchor_prefix="t")
        return JSONResponse(
            {"output": result.output, "messages": result.messages, "rejected": result.rejected, "html": html},
            headers={"cache-control": "no-store"},
        )

    routes = [
        Route("/", signed_in_only(queue)),
        # Row trace ids are free text and may hold "/": the resolve route is matched first.
        Route("/resolve", signed_in_only(resolve_many), methods=["POST"]),
        Route("/items/{trace_id:path}/resolve", signed_in_only(resolve), methods=["POST"]),
        Route("/items/{trace_id:path}", signed_in_only(item_page)),
        Route("/inspect", signed_in_only(inspector)),
        Route("/inspect/sample", signed_in_only(sample)),
        Route("/inspect/plan", signed_in_only(plan), methods=["POST"]),
        Route("/login", login_page),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))] if allowed_hosts else []
    async def store_unavailable(request: Request, exc: Exception) -> Response:
        # The queue is gone (a deleted file, a database that is down): say so, as a page, not a bare 500.
        _log.error("review page: the review queue cannot be read: %s", exc)
        return problem(request, 503, f"the review queue cannot be read right now: {exc}")

    handlers = {ReviewStoreError: store_unavailable, sqlite3.Error: store_unavailable}
    return Starlette(routes=routes, middleware=middleware, exception_handlers=handlers)


def shown_id(trace_id: str, limit: int = 100) -> str:
    """``trace_id`` quoted for a message, cut at ``limit`` characters (a path may be any length)."""
    return repr(trace_id) if len(trace_id) <= limit else f"{trace_id[:limit]!r}... ({len(trace_id)} characters)"


def app_for(store: ReviewStore | None, config: TraceFenceConfig, listen: str) -> Starlette:
    """:func:`create_app` as configured: the review token (``service.review_token``), the ``ui`` settings, and
    the host names a page listening on ``listen`` answers (:func:`~otel_tracefence.ui.security.served_hosts`).
    For ``tracefence ui`` and for a page served inside another process (``service.ui_endpoint``); call
    :func:`~otel_tracefence.ui.security.check_ui_exposure` first."""
    return create_app(
        store,
        review_token=config.service.review_token,
        trace_url_template=config.ui.trace_url_template,
        trace_link_templates=config.ui.trace_links,
        config=config,
        max_inspect_bytes=config.ui.max_inspect_bytes,
        allowed_hosts=served_hosts(listen),
    )

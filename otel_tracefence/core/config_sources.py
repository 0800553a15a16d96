"""The configuration's raw inputs read strictly: a key given twice is refused, not read last-wins.

YAML (1.2, section 3.2.1.1) and JSON (RFC 8259, section 4: names "SHOULD be unique") leave a
repeated key to the reader; PyYAML and ``json`` keep the last. A setting given twice has no one
meaning, so the configuration is refused with the key's name (docs/DECISIONS.md 191), as CLI rows
and spans are. Names of ``OTEL_TRACEFENCE_*`` variables are read case-insensitively by the settings
model: two variables that differ only in case are the same setting given twice.
"""

from __future__ import annotations

import difflib
import json
import typing
from typing import Any, Iterable, Mapping, Sequence

from pydantic import BaseModel


class DuplicateKey(ValueError):
    """A key given twice; ``field`` is the top-level setting it is under (``""`` at the top)."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` that raises :class:`DuplicateKey` (``line N: key 'k' given twice (first on
    line M)``) for a mapping holding a key twice. Merge keys (``<<``) may still be overridden, as YAML's
    merge type says. Raises ``yaml.YAMLError`` for text that is not YAML."""
    import yaml

    class _StrictLoader(yaml.SafeLoader):
        pass

    def mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
        first: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = loader.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                if key in first:
                    raise DuplicateKey(f"line {line}: key {key!r} given twice (first on line {first[key]})")
                first[key] = line
            except TypeError:  # an unhashable key: the loader itself refuses it below
                continue
        return loader.construct_mapping(node, deep=deep)

    _StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass


def refuse_duplicate_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads`` ``object_pairs_hook``: a dict, or :class:`DuplicateKey` for a name given twice."""
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise DuplicateKey(f"key {key!r} given twice")
        found[key] = value
    return found


def refuse_case_twins(settings: Mapping[Any, Any]) -> None:
    """Raise :class:`DuplicateKey` for two top-level keys of the config file that differ only in case
    (``tool_rules`` and ``Tool_rules``): the settings model reads top-level names in any case, as it reads
    variables, so they are one setting given twice, and it would keep one of them silently."""
    seen: dict[str, str] = {}
    for key in settings:
        if isinstance(key, str):
            other = seen.setdefault(key.lower(), key)
            if other != key:
                raise DuplicateKey(f"keys {other!r} and {key!r} are one setting given twice (names are read in any case)", key.lower())


def check_environment(environ: Mapping[str, str], prefix: str) -> None:
    """Raise :class:`DuplicateKey` for two ``prefix*`` variables that differ only in case, or a JSON
    value (a list or nested setting) holding a key twice. Values that are not JSON are left to the
    settings model, which names them."""
    by_folded: dict[str, str] = {}
    for name in sorted(environ):
        if not name.upper().startswith(prefix):
            continue
        setting = name[len(prefix):].lower().split("__")[0]
        other = by_folded.setdefault(name.lower(), name)
        if other != name:
            raise DuplicateKey(f"{other} and {name} are one setting given twice (names are read in any case)", setting)
        value = environ[name].strip()
        if value[:1] in ("[", "{"):
            try:
                json.loads(value, object_pairs_hook=refuse_duplicate_pairs)
            except DuplicateKey as exc:
                raise DuplicateKey(f"{name}: {exc}", setting) from None
            except ValueError:
                pass


def unknown_environment(environ: Mapping[str, str], prefix: str, model: type[BaseModel], others: Iterable[str]) -> list[str]:
    """The ``prefix*`` variables (sorted) whose setting (the name up to its first ``__``) is no field of
    ``model`` and that are none of ``others`` (variables read elsewhere), compared case-insensitively. A
    nested name under a known setting (``LIMITS__MAX_ARGUMENT_BYTE``) is the model's to refuse."""
    known_others = {name.upper() for name in others}
    unknown = []
    for name in sorted(environ):
        upper = name.upper()
        if upper.startswith(prefix) and upper not in known_others and upper[len(prefix):].lower().split("__")[0] not in model.model_fields:
            unknown.append(name)
    return unknown


def closest_setting(model: type[BaseModel], loc: Sequence[Any]) -> str:
    """``; did you mean <path>?`` naming the setting of the mapping at ``loc[:-1]`` (within ``model``) closest to the
    unknown key ``loc[-1]``, or ``""`` when none is close (:func:`difflib.get_close_matches`)."""
    found: type[BaseModel] | None = model
    for part in loc[:-1]:
        if isinstance(part, int):  # an item of a list of mappings
            continue
        field = found.model_fields.get(str(part)) if found is not None else None
        found = _model_in(field.annotation) if field is not None else None
    if found is None:
        return ""
    close = difflib.get_close_matches(str(loc[-1]), list(found.model_fields), n=1)
    return f"; did you mean {'.'.join(str(p) for p in (*loc[:-1], close[0]))}?" if close else ""


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation holds (itself, or inside ``list[...]``, ``X | None``), or ``None``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((found for arg in typing.get_args(annotation) if (found := _model_in(arg)) is not None), None)

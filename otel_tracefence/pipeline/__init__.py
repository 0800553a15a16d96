"""The engine every door shares: spans of a trace -> steps -> plan (``plan``), the annotations written on
export (``annotate``), holding spans by trace (``trace_buffer``) and deciding and handing them on (``fence``)."""

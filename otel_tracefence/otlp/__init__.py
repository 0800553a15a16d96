"""OTLP/JSON files: the reader (``json_reader``) and the writer (``json_writer``)."""

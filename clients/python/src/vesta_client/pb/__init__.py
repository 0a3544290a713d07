"""The messages and service stub generated from proto/vesta/v1/vesta.proto
(tools/generate.py; do not edit)."""

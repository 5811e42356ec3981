"""Readers and writers of exactmax's JSON formats.  Every error names the file and JSON path."""

from .errors import InputError
from .models import load_domain, load_model, model_to_json, write_json_atomic

__all__ = ["InputError", "load_model", "load_domain", "model_to_json", "write_json_atomic"]

"""exactmax: exact, checked statements about Maxout networks and the Transformers that
represent them (Gu, Yang, Zhou, arXiv 2603.03084)."""

__version__ = "0.1.0"

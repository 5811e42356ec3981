"""Exports of certificates to other checkers (untrusted: the receiving checker decides)."""

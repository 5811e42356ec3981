"""Softmax attention: evaluation in ball arithmetic (and, later, certified error bounds)."""

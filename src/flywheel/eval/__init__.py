"""Evaluation on held-out tasks."""

"""Data loaders and protocol code."""

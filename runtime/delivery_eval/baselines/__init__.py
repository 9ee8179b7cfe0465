"""Baselines the header-stack encodings are compared with, on the same topologies and receivers."""

"""The package version: a leaf, so deploy and onnx read it without importing staged."""

__version__ = "0.1.0"
# the torch release whose API and numbers staged follows: what ``torch.__version__`` says
# (with staged's version as its local label) where staged stands in for torch
TORCH = "2.13.0"

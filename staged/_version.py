"""The package version: a leaf, so deploy and onnx read it without importing staged."""

__version__ = "0.1.0"

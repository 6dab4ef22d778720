"""Conformance with Apache Beam: test-only code and data (README.md)."""

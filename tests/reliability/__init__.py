"""Chaos and interop cases on the mesh as real processes (``make test-reliability``; RELIABILITY.md)."""

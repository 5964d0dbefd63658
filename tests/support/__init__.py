"""Test support: fixtures' building blocks and a probe servicer of the real contracts."""

"""Inference replicas: one generation with cache and failover, the picker, the replica set and its streams."""

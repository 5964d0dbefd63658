"""Load generators and benchmarks for AgentMesh (see BENCHMARKS.md for results)."""

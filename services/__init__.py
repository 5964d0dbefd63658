"""AgentMesh services: the shared runtime and the inference, tools and router services."""

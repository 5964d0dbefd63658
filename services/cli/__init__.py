"""The ``agentmesh`` command line: ``up`` runs the mesh locally; ``chat`` and ``complete`` talk to it."""

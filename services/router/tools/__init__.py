"""The router's side of the tool executors: the Execute streams, each tenant's tool list, a planner per list."""

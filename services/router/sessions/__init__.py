"""Sessions as event logs in Redis: the store, and the records and events it holds."""

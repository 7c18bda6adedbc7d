"""pai-durable-dbos as a plugin (its hook is written separately)."""

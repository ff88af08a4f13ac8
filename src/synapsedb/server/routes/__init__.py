"""The routes, by area: each parses, calls the engine and encodes."""

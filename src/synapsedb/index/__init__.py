"""Per-namespace indexes: the columnar catalog, vector and keyword search."""

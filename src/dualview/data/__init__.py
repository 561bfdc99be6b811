"""Data: the record schema, JSONL I/O, format adapters, mixes and mining."""

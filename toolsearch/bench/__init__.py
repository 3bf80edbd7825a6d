"""The benchmark harness: retrieval quality and speed of backends on labeled datasets."""

"""Embedding models: the registry that picks a backend, the ONNX runtime, remote and native backends, endpoints, credentials and BM25."""

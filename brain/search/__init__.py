"""Search: fusion of dense, BM25 and link legs, the search policy, fitted weights, reranking and result presentation."""

"""Store bookkeeping above the vector store: store metadata, start-time integrity checks, snapshots, index maintenance and the recall key."""

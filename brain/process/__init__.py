"""The owner process: who owns a data dir, its start sequence, logs, reports and the hook spool drain."""

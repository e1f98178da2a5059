"""Trust: caller identity and tenancy, allowed paths, redaction and its secret patterns, input limits."""

"""Security suite: tenancy, paths, secrets, bounded work, storage faults, fuzzing (issue 13)."""

"""LLM enrichment: the model router (fast and hard routes) and the prompts that build notes."""

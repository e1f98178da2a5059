"""The coding-agent workflow: sessions and their handoffs, mistakes and their fixes."""

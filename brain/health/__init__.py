"""Vector health: stats, integrity scan, GC, repair, duplicates and hot files (service.py)."""

from brain.health.hot_files import HotFiles
from brain.health.service import HealthConfig, HealthDeps, HealthService

__all__ = ["HealthConfig", "HealthDeps", "HealthService", "HotFiles"]

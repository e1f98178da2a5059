"""The adaptive dense weight's fitted values (brain/search/adaptive.py). Written by
``python -m bench.fusion_fit --write``; do not edit by hand. Empty: no fit yet (the
configured dense_weight applies as is)."""

from typing import Any

FITTED: dict[str, Any] = {'coef': [0.0, 0.01, 0.0, 0.05, 0.0, 0.02, 0.0],
 'features': ['terms',
              'bm25_margin',
              'bm25_per_term',
              'agreement',
              'dense_top',
              'dense_spread',
              'bm25_spread'],
 'high': 0.95,
 'low': 0.05,
 'mean': [1.82261, 0.216331, 3.766262, 0.379135, 0.551223, 0.10919, 0.502014],
 'scale': [0.278276, 0.181986, 1.784645, 0.231099, 0.117917, 0.057641, 0.174045],
 'shift': -0.03}

"""Earlier gates' parameters, kept so that benchmarks/gate_calibration.py can score them
beside the gate it fits, on the same searches (baseline rows of its tables).
"""

# The gate before the two technical-pack signals (gate-v5, 2026-11-25), kept as a
# baseline row: its nine signals are still computed, so it is scored on the same searches.
PREVIOUS = {"version": "gate-v5",
            "weights": {"similarity": 9.609, "margin": 5.036, "coverage": 1.505,
                        "section_coverage": 2.56, "unknown": -1.73, "specific": -0.868,
                        "pairs": 1.385, "pack_pairs": 2.191, "names": -2.48},
            "bias": -2.84, "cut": 0.42}
# The gate shipped before the text rules of packs/text.py (gate-v7, plural fold, 2026-11-26):
# with --before, the rows searched with that code are scored with it beside this run's.
BEFORE = {"version": "gate-v7",
          "weights": {"similarity": 10.966, "margin": 3.05, "coverage": 1.854,
                      "section_coverage": 2.482, "unknown": -1.773, "specific": 0.084,
                      "pairs": 1.128, "pack_pairs": 1.924, "names": -2.255,
                      "doc_specific": -1.912, "doc_rare_names": -2.342, "small": 1.0},
          "bias": -2.609, "cut": 0.5}

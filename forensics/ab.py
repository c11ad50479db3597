"""A/B analysis: arm weights, the sample-ratio-mismatch test, sticky hash arms, and the
contamination report of one test over a case's `sends` table.

- Pure arithmetic, no database: `parse_weights("A=50,B=50")`, `srm_test(counts, weights)`,
  `assign_arm(test_id, candidate, weights, salt)`.
- `analyse(con, test_id, weights)` reads the case (DuckDB) and returns an AbReport: per-arm counts
  all vs clean, the contamination rate, a sample-ratio-mismatch test, the contaminated people.
  Excluding them and making assignment sticky is remediation's job (`remediation.ab`).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import queries
from forensics.addresses import install_sql, normalize_address, normalize_label
from forensics.errors import ConfigError, InputError

SRM_ALPHA = 0.001  # flag a sample-ratio mismatch below this p-value
DEFAULT_ARMS = ("A", "B")
MAX_ARM_LEN = 64


def _arm_name(raw: str, what: str) -> str:
    name = raw.strip()
    if not name or len(name) > MAX_ARM_LEN or not name.isprintable():
        raise ConfigError(f"{what}: arm name {name!r} must be 1 to {MAX_ARM_LEN} printable characters")
    return name


def _weight_value(raw: str, arm: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise ConfigError(f"--weights: weight of {arm} is not a number: {raw.strip()!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"--weights: weight of {arm} must be a positive number, got {raw.strip()!r}")
    return value


def parse_weights(text: str) -> dict[str, float]:
    """`"A=50,B=50"` → {"A": 50.0, "B": 50.0}; at least two distinct arms, positive weights."""
    weights: dict[str, float] = {}
    for part in text.split(","):
        arm, sep, raw = part.partition("=")
        if not sep:
            raise ConfigError(f"--weights: expected ARM=WEIGHT, got {part.strip()!r}")
        name = _arm_name(arm, "--weights")
        if name in weights:
            raise ConfigError(f"--weights: arm {name} given twice")
        weights[name] = _weight_value(raw, name)
    if len(weights) < 2:
        raise ConfigError("--weights: give at least two arms, e.g. A=50,B=50")
    return weights


def parse_arms(text: str) -> list[str]:
    """`"A,B"` → ["A", "B"]; at least two distinct arms."""
    arms = [_arm_name(part, "--arms") for part in text.split(",")]
    if len(set(arms)) != len(arms):
        raise ConfigError("--arms: an arm is given twice")
    if len(arms) < 2:
        raise ConfigError("--arms: give at least two arms, e.g. A,B")
    return arms


def resolve_weights(arms: list[str] | None, weights: dict[str, float] | None) -> dict[str, float]:
    """Arms and weights from --arms/--weights: equal weights by default, A and B when neither is given."""
    if weights and arms and set(arms) != set(weights):
        raise ConfigError("--arms and --weights name different arms")
    if weights:
        return dict(weights)
    return {arm: 1.0 for arm in (arms or DEFAULT_ARMS)}


def normalize_unit(candidate: str) -> str:
    """The unit of assignment: a candidate id trimmed; an address in its normal form (as in the logs)."""
    unit = candidate.strip()
    if not unit:
        raise ConfigError("--candidate is empty")
    return (normalize_address(unit) or unit) if "@" in unit else unit


def hash_fraction(salt: str, test_id: str, unit: str) -> float:
    """sha256(salt|test|unit) → a number uniform in [0, 1), the same on every machine and run."""
    digest = hashlib.sha256(f"{salt}|{test_id}|{unit}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def arm_for_fraction(fraction: float, weights: dict[str, float]) -> str:
    """Pick the arm whose cumulative-weight interval holds `fraction` (arms in sorted order)."""
    arms = sorted(weights)
    total = sum(weights.values())
    cumulative = 0.0
    for arm in arms:
        cumulative += weights[arm] / total
        if fraction < cumulative:
            return arm
    return arms[-1]  # rounding left a sliver above the last boundary


def assign_arm(test_id: str, candidate: str, weights: dict[str, float], salt: str = "") -> str:
    """The deterministic arm of a candidate: sticky by construction, no state needed."""
    unit = normalize_unit(candidate)
    return arm_for_fraction(hash_fraction(salt, test_id, unit), weights)


def _srm_arms(counts: dict[str, int], weights: dict[str, float] | None) -> dict[str, float]:
    if weights is None:
        return {arm: 1.0 for arm in sorted(counts)}
    unknown = sorted(set(counts) - set(weights))
    if unknown:
        raise ConfigError(f"variant {unknown[0]!r} is in the logs but not in --weights")
    return dict(weights)


def srm_test(counts: dict[str, int], weights: dict[str, float] | None = None) -> dict | None:
    """Chi-squared goodness of fit of clean unit counts to the expected split (None if not testable)."""
    from scipy.stats import chisquare

    arm_weights = _srm_arms(counts, weights)
    arms = sorted(arm_weights)
    observed = [int(counts.get(arm, 0)) for arm in arms]
    total = sum(observed)
    if len(arms) < 2 or total == 0:
        return None
    weight_sum = sum(arm_weights.values())
    expected = [total * arm_weights[arm] / weight_sum for arm in arms]
    result = chisquare(observed, f_exp=expected)
    p_value = float(result.pvalue)
    return {
        "arms": arms, "observed": observed, "expected": expected,
        "chi2": float(result.statistic), "dof": len(arms) - 1, "p_value": p_value,
        "alpha": SRM_ALPHA, "mismatch": p_value < SRM_ALPHA,
        "small_sample": min(expected) < 5,
    }


CONTAMINATION_WARN_RATE = 0.01  # warn when at least 1 % of units...
CONTAMINATION_WARN_UNITS = 10  # ...and at least 10 people are contaminated


@dataclass
class AbReport:
    test_id: str
    sends: int
    sends_without_variant: int
    sends_without_unit: int
    units: int
    contaminated: int
    arms: list[dict]
    srm: dict | None
    contaminated_units: list[dict]
    weights: dict[str, float] | None = None

    @property
    def contamination_rate(self) -> float:
        return self.contaminated / self.units if self.units else 0.0

    @property
    def contamination_warning(self) -> bool:
        return self.contamination_rate >= CONTAMINATION_WARN_RATE and self.contaminated >= CONTAMINATION_WARN_UNITS

    def to_dict(self) -> dict:
        return {
            "test_id": self.test_id, "sends": self.sends,
            "sends_without_variant": self.sends_without_variant, "sends_without_unit": self.sends_without_unit,
            "units": self.units, "contaminated": self.contaminated,
            "contamination_rate": self.contamination_rate, "contamination_warning": self.contamination_warning,
            "arms": self.arms, "srm": self.srm, "contaminated_units": self.contaminated_units,
        }


# --- analysis (DuckDB, over the case's `sends`) -------------------------------------------------

def _no_such_test(con, test_id: str) -> InputError:
    seen = [row[0] for row in queries.run(con, "ab_test_ids").fetchall()]
    hint = f"tests in these logs: {', '.join(seen)}" if seen else "no send carries a test_id"
    return InputError(f"no sends with test_id {test_id!r} ({hint})")


def _arm_rows(counted: list[dict], srm: dict | None, weights: dict | None) -> list[dict]:
    """Observed arms plus any weighted arm nobody received, with weight and expected clean count."""
    rows = {row["variant"]: dict(row) for row in counted}
    for arm in weights or {}:
        rows.setdefault(arm, {"variant": arm, "units_all": 0, "units_clean": 0, "units_first_seen": 0, "sends": 0})
    expected = dict(zip(srm["arms"], srm["expected"])) if srm else {}
    for arm, row in rows.items():
        row["weight"] = weights[arm] if weights else 1.0
        row["expected_clean"] = expected.get(arm)
    return [rows[arm] for arm in sorted(rows)]


def analyse(con, test_id: str, weights: dict[str, float] | None = None) -> AbReport:
    """Contamination report for one test from the `sends` table of a DuckDB connection. The test id is
    compared in normal form (`Subj` is ` subj`, as a campaign is) and reported as given."""
    test_id = test_id.strip()
    install_sql(con)  # the unit of an address is its normal form; a test id is compared in its own
    queries.run(con, "ab_sends_build", {"test_key": normalize_label(test_id)})
    queries.run(con, "ab_units_build")
    overview = queries.one(con, "ab_overview")
    if overview["sends"] == 0:
        raise _no_such_test(con, test_id)
    if overview["units"] == 0:
        raise InputError(f"test {test_id!r} has {overview['sends']} sends but none names both a variant and a person")
    counted = queries.rows(con, "ab_arm_counts")
    srm = srm_test({row["variant"]: row["units_clean"] for row in counted}, weights)
    return AbReport(
        test_id=test_id, srm=srm, weights=weights, arms=_arm_rows(counted, srm, weights),
        contaminated_units=queries.rows(con, "ab_contaminated"), **overview,
    )

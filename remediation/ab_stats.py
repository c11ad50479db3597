"""The arithmetic of A/B clean-up: arm weights, the sample-ratio-mismatch test, sticky hash arms.

Pure functions, no database: `parse_weights("A=50,B=50")`, `srm_test(counts, weights)`,
`assign_arm(test_id, candidate, weights, salt)`.
"""

from __future__ import annotations

import hashlib
import math

from forensics.errors import ConfigError

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
    """The unit of assignment: a candidate id trimmed; an address also lower-cased (as in the logs)."""
    unit = candidate.strip()
    if not unit:
        raise ConfigError("--candidate is empty")
    return unit.lower() if "@" in unit else unit


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

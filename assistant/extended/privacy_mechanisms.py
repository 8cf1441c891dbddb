"""Differential-privacy mechanisms, and the accountants that compose them (Google's ``dp-accounting``).

**Mechanisms.** Each adds calibrated noise to a numeric query result and names the
``dp-accounting`` event that describes it, so an accountant can compose it with the others:

- :class:`Laplace` (counts and sums): noise scale ``b = sensitivity / epsilon``, which makes a query
  whose L1 sensitivity (the most one record can change the whole result vector, summed over its
  coordinates) is ``sensitivity`` ``epsilon``-DP. Event: ``LaplaceDpEvent(noise_multiplier = 1 /
  epsilon)`` (the scale in units of the sensitivity).
- :class:`Gaussian` (vectors, e.g. federated model updates): noise multiplier ``sigma`` =
  ``dp_accounting.gaussian_mechanism.get_sigma_gaussian(epsilon, delta)``, the smallest sigma for
  which the Gaussian mechanism is ``(epsilon, delta)``-DP (the analytic Gaussian mechanism of Balle
  and Wang, 2018), and standard deviation ``sigma x sensitivity`` where ``sensitivity`` is the L2
  sensitivity (the clipping norm). Event: ``GaussianDpEvent(sigma)``.

The neighbouring relation is dp-accounting's default, add or remove one record (what a "record" is
is said by each query: one memory, one conversation, one user's update). A requested epsilon is
rounded down to two significant digits (:func:`check_epsilon`).

**Accountants** (:data:`ACCOUNTANTS`, the setting ``privacy.accountant``): ``pld`` (privacy-loss
distributions, :class:`PldAccountant`; tight for both mechanisms: ten Laplace releases at epsilon 0.1
compose to 0.990 at delta 1e-5, the eleventh to 1.080) and ``rdp`` (Renyi DP,
:class:`RdpAccountant`; cheaper, looser for Laplace: one release at epsilon 0.1 is charged 0.1028,
ten 0.990; so under ``rdp`` a single request of the whole budget is refused). Both compose the ledger's events from scratch on every charge (identical events
grouped), so the answer never depends on what a process remembered.

**Randomness.** Every release draws from a fresh ``numpy.random.default_rng()``, which seeds PCG64
with 128 bits from the operating system's entropy source (``SeedSequence`` reads ``os.urandom``); no
generator state outlives a release, so seeing one release's noise says nothing about the next.
PCG64 is not a cryptographic generator, and floating-point Laplace and Gaussian sampling leaves the
low bits of an output open to Mironov's (2012) attack: acceptable for releases to the user and their
own peers, not for a public data release (there, use a discrete or snapping mechanism).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from assistant.errors import ValidationFailed

LAPLACE, GAUSSIAN = "laplace", "gaussian"
MIN_EPSILON = 0.001  # below this a release is noise only, and a ledger of them grows without bound
MAX_EPSILON = 100.0


def check_number(name: str, value: float, low: float = 0.0, high: float = math.inf, *,
                 low_inclusive: bool = False) -> float:
    """``value`` as a float if finite and within ``low``..``high`` (``low`` itself only when
    ``low_inclusive``); ValidationFailed naming ``name`` otherwise."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    below = number < low if low_inclusive else number <= low
    if not math.isfinite(number) or below or number > high:
        bound = ("at least" if low_inclusive else "greater than") + f" {low:g}"
        bound += f" and at most {high:g}" if math.isfinite(high) else ""
        error = f"must be a finite number {bound} (got {value!r})"
        raise ValidationFailed(f"{name} {error}", [{"field": name, "error": error}])
    return number


def check_epsilon(value: float) -> float:
    """A valid epsilon, rounded down to two significant digits (0.123 -> 0.12: a little more noise, never
    less). Few distinct noise levels keep the accountant's work bounded: identical events are composed
    together, so a period's ledger holds at most a few hundred distinct ones however it is used."""
    number = check_number("epsilon", value, MIN_EPSILON, MAX_EPSILON, low_inclusive=True)
    step = 10.0 ** (math.floor(math.log10(number)) - 1)
    return round(math.floor(number / step + 1e-9) * step, 12)


@dataclass(frozen=True)
class Event:
    """One mechanism's privacy event, as the ledger keeps it: what an accountant composes."""

    mechanism: str
    noise_multiplier: float

    def dp_event(self) -> Any:
        from dp_accounting import dp_event

        if self.mechanism == LAPLACE:
            return dp_event.LaplaceDpEvent(self.noise_multiplier)
        if self.mechanism == GAUSSIAN:
            return dp_event.GaussianDpEvent(self.noise_multiplier)
        raise ValueError(f"unknown mechanism {self.mechanism!r}")


@dataclass(frozen=True)
class Laplace:
    """``epsilon``-DP for a query of L1 sensitivity ``sensitivity``: Laplace noise of scale
    ``sensitivity / epsilon`` on every coordinate."""

    epsilon: float
    sensitivity: float = 1.0
    name: str = field(default=LAPLACE, init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        check_number("sensitivity", self.sensitivity)

    @property
    def noise_multiplier(self) -> float:
        return 1.0 / self.epsilon

    @property
    def scale(self) -> float:
        return self.sensitivity / self.epsilon

    def event(self) -> Event:
        return Event(LAPLACE, self.noise_multiplier)

    def parameters(self) -> dict[str, float]:
        return {"epsilon": self.epsilon, "sensitivity": self.sensitivity, "noise_multiplier": self.noise_multiplier,
                "scale": self.scale}

    def noise(self, shape: int | tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return rng.laplace(0.0, self.scale, shape)


@dataclass(frozen=True)
class Gaussian:
    """``(epsilon, delta)``-DP for a query of L2 sensitivity ``sensitivity`` (the clipping norm):
    Gaussian noise of standard deviation ``noise_multiplier x sensitivity`` on every coordinate."""

    epsilon: float
    delta: float
    sensitivity: float = 1.0
    name: str = field(default=GAUSSIAN, init=False)
    noise_multiplier: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        from dp_accounting import gaussian_mechanism

        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        check_number("delta", self.delta, high=0.5)
        check_number("sensitivity", self.sensitivity)
        sigma = gaussian_mechanism.get_sigma_gaussian(self.epsilon, self.delta)
        object.__setattr__(self, "noise_multiplier", float(sigma))

    @property
    def std(self) -> float:
        return self.noise_multiplier * self.sensitivity

    def event(self) -> Event:
        return Event(GAUSSIAN, self.noise_multiplier)

    def parameters(self) -> dict[str, float]:
        return {"epsilon": self.epsilon, "delta": self.delta, "sensitivity": self.sensitivity,
                "noise_multiplier": self.noise_multiplier, "sigma": self.std}

    def noise(self, shape: int | tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return rng.normal(0.0, self.std, shape)


Mechanism = Laplace | Gaussian


def fresh_rng() -> np.random.Generator:
    """A generator seeded from the OS entropy source (see the module docstring)."""
    return np.random.default_rng()


class Accountant(Protocol):
    """Composes privacy events into the epsilon they spend together at ``delta``."""

    id: str

    def epsilon(self, events: Sequence[Event], delta: float) -> float: ...


def _compose(accountant: Any, events: Sequence[Event], delta: float) -> float:
    if not events:
        return 0.0
    for event, count in Counter(events).items():
        accountant.compose(event.dp_event(), count)
    return max(0.0, float(accountant.get_epsilon(delta)))


class PldAccountant:
    """dp-accounting's privacy-loss-distribution accountant (tight; the default)."""

    id = "pld"

    def epsilon(self, events: Sequence[Event], delta: float) -> float:
        from dp_accounting.pld.pld_privacy_accountant import PLDAccountant

        return _compose(PLDAccountant(), events, delta)


class RdpAccountant:
    """dp-accounting's Renyi-DP accountant."""

    id = "rdp"

    def epsilon(self, events: Sequence[Event], delta: float) -> float:
        from dp_accounting.rdp.rdp_privacy_accountant import RdpAccountant as DpRdpAccountant

        return _compose(DpRdpAccountant(), events, delta)


ACCOUNTANTS: dict[str, type[PldAccountant] | type[RdpAccountant]] = {"pld": PldAccountant, "rdp": RdpAccountant}


def create_accountant(accountant_id: str) -> Accountant:
    try:
        return ACCOUNTANTS[accountant_id]()
    except KeyError:
        raise ValueError(f"unknown privacy accountant {accountant_id!r}: one of {', '.join(ACCOUNTANTS)}") from None

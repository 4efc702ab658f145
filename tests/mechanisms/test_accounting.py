import itertools
import math
import re

import numpy as np
import pytest

from dprelease.mechanisms.accounting import plan_budget, split_budget, zcdp_delta, zcdp_epsilon, zcdp_rho
from dprelease.mechanisms.errors import BudgetError
from dprelease.mechanisms.primitives import gaussian_sigma, laplace_scale


def test_zcdp_rho_matches_published_values():
    # privacy-testing note §1: eps = 1, delta = 1e-6 gives rho_simple = 0.01747, rho_CKS = 0.02436.
    L = math.log(1e6)
    assert (math.sqrt(L + 1) - math.sqrt(L)) ** 2 == pytest.approx(0.01747, abs=1e-5)
    assert zcdp_rho(1.0, 1e-6) == pytest.approx(0.02436, abs=1e-5)


@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 2.0, 8.0])
@pytest.mark.parametrize("delta", [1e-9, 1e-6, 1e-3])
def test_conversions_round_trip_and_never_overshoot(eps, delta):
    rho = zcdp_rho(eps, delta)
    assert zcdp_delta(rho, eps) <= delta
    back = zcdp_epsilon(rho, delta)
    assert back <= eps
    assert back == pytest.approx(eps, rel=1e-9)
    # the simple bound eps = rho + 2 sqrt(rho ln 1/delta) is always looser
    assert back <= rho + 2 * math.sqrt(rho * math.log(1 / delta))


def test_zcdp_delta_is_monotone_in_rho():
    rhos = np.linspace(1e-4, 0.5, 50)
    deltas = [zcdp_delta(r, 1.0) for r in rhos]
    assert all(a <= b for a, b in itertools.pairwise(deltas))


def test_split_budget_never_exceeds_total():
    rng = np.random.default_rng(0)
    for _ in range(20_000):
        total = float(rng.uniform(1e-4, 10))
        w = list(rng.uniform(0.01, 1, size=int(rng.integers(1, 20))))
        shares = split_budget(total, w)
        assert math.fsum(shares) <= total and sum(shares) <= total
        assert all(s > 0 for s in shares)
        assert math.fsum(shares) == pytest.approx(total, rel=1e-12)


def test_plan_never_exceeds_spec():
    for notion, delta in (("zcdp", 1e-6), ("pure", 0.0)):
        plan = plan_budget(notion, 1.0, delta, {"marginals": 0.3, "moments": 0.7})
        assert plan.spent_epsilon <= 1.0
        parts = [s.rho if notion == "zcdp" else s.epsilon for s in plan.stages]
        assert parts[0] / parts[1] == pytest.approx(0.3 / 0.7)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"epsilon": 0.0}, "privacy.epsilon (0.0) must be a finite number > 0"),
        ({"epsilon": math.nan}, "privacy.epsilon (nan) must be a finite number > 0"),
        ({"epsilon": math.inf}, "privacy.epsilon (inf) must be a finite number > 0"),
        ({"delta": 0.0}, "privacy.delta (0.0) must be in (0, 1)"),
        ({"delta": 1.0}, "privacy.delta (1.0) must be in (0, 1)"),
        ({"notion": "pure"}, "privacy.delta (1e-06) must be 0 with accountant 'pure'"),
        ({"notion": "rdp"}, "privacy.accountant (rdp) must be 'zcdp' or 'pure'"),
        ({"weights": {"a": 0.0}}, "allocation weights ({'a': 0.0}) must all be finite numbers > 0"),
    ],
)
def test_plan_budget_refuses_invalid_budgets(kwargs, message):
    args = {"notion": "zcdp", "epsilon": 1.0, "delta": 1e-6, "weights": {"a": 1.0}} | kwargs
    with pytest.raises(BudgetError, match=re.escape(message)):
        plan_budget(args["notion"], args["epsilon"], args["delta"], args["weights"])


def test_noise_scales():
    # Gaussian: sigma = Delta2 / sqrt(2 rho); Laplace: b = Delta1 / eps; both rounded up
    assert gaussian_sigma(math.sqrt(2), 0.5) == math.nextafter(math.sqrt(2), math.inf)
    assert gaussian_sigma(3.0, 2.0) >= 1.5
    assert laplace_scale(2.0, 0.5) == math.nextafter(4.0, math.inf)
    with pytest.raises(BudgetError, match=re.escape("rho (0.0) must be a finite number > 0")):
        gaussian_sigma(1.0, 0.0)


def test_lifetime_composition_takes_the_better_valid_rule():
    from dprelease.mechanisms.lifetime import Charge, compose_lifetime

    z = Charge("zcdp", zcdp_rho(1.0, 1e-6), 1.0, 1e-6)
    three = compose_lifetime([z, z, z], 1e-6)
    assert three.basic == (3.0, 3e-6)  # basic: sums (its δ 3e-6 exceeds the lifetime δ)
    assert three.zcdp[0] == zcdp_epsilon(3 * z.rho, 1e-6) and three.epsilon == three.zcdp[0] < 2
    pure = Charge("pure", None, 0.1, 0.0)  # ε-DP is ε²/2-zCDP (Bun & Steinke Prop. 1.4)
    assert compose_lifetime([pure] * 2, 0.0).epsilon == 0.2  # δ = 0: basic only
    many = compose_lifetime([pure] * 100, 1e-6)  # 100 × 0.1: zCDP gives 5.22 < 10
    assert many.epsilon == zcdp_epsilon(100 * 0.1**2 / 2, 1e-6) < 5.3 and many.basic[0] == pytest.approx(10)
    assert compose_lifetime([], 1e-6).epsilon == 0.0
    with pytest.raises(BudgetError, match="delta"):
        compose_lifetime([z], 0.0)  # a zCDP release cannot fit a lifetime delta of 0


def test_headroom_is_the_largest_next_epsilon_that_composes_within_the_lifetime():
    """Issue 18: under zCDP "epsilon left" is not the lifetime epsilon minus the spent one.
    The headroom is checked against compose_lifetime itself: a next release at it fits,
    one 0.1 % larger does not; and it is larger than the naive difference."""
    from dprelease.mechanisms.accounting import zcdp_rho
    from dprelease.mechanisms.lifetime import Charge, compose_lifetime, headroom

    lifetime = (1.5, 1e-5)
    first = Charge("zcdp", zcdp_rho(1.0, 1e-6), 1.0, 1e-6)
    room = headroom([first], lifetime, "zcdp", 1e-6)

    def total(eps: float) -> float:
        return compose_lifetime([first, Charge("zcdp", zcdp_rho(eps, 1e-6), eps, 1e-6)], 1e-5).epsilon

    assert total(room.epsilon) <= 1.5 < total(room.epsilon * 1.001)
    assert room.epsilon > 1.5 - compose_lifetime([first], 1e-5).epsilon
    assert room.rho == pytest.approx(zcdp_rho(1.5, 1e-5) - first.rho)
    # pure DP with a lifetime delta of 0: basic composition, the plain difference
    pure = headroom([Charge("pure", None, 0.4, 0.0)], (1.0, 0.0), "pure")
    assert (pure.epsilon, pure.rho) == (pytest.approx(0.6), None)
    # a void release leaves nothing
    assert headroom([Charge.void()], lifetime).epsilon == 0.0
    # spent beyond the lifetime: nothing left, never negative
    assert headroom([Charge("pure", None, 2.0, 0.0)], (1.0, 0.0), "pure").epsilon == 0.0

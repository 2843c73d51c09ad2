"""Kueue admission semantics, hand-worked. Each case ports the *behaviour* documented by Kueue v0.19
(concepts/cluster_queue.md: cohorts, borrowingLimit, lendingLimit; concepts/preemption.md;
concepts/fair_sharing.md; KEP-1224) into numbers small enough to check by hand."""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.simulator.admission import Admission
from scheduling.simulator.model import Cohort, Policies, Preemption, Quota, Tenant


@dataclass(eq=False)
class W:
    cq: object
    units: int
    priority: int = 0
    admitted_s: float = 0.0
    seq: int = 0


def team(name: str, nominal: int, cohort: str | None = "c", borrowing: int | None = None,
         lending: int | None = None, weight: float = 1.0) -> Tenant:
    return Tenant(name, cohort, weight, (Quota("gpu", nominal, borrowing, lending),))


def admit(adm: Admission, tenant: str, units: int, *, priority: int = 0, at: float = 0.0, seq: list[int] = [0]) -> W:
    seq[0] += 1
    w = W(adm.cq(tenant, "gpu"), units, priority, at, seq[0])
    assert adm.fits(w.cq, units), f"{tenant} +{units} should fit"
    adm.admit(w)
    return w


def test_cohort_lends_unused_nominal_quota():
    # team-a 9 and team-b 9 in one cohort (the shared-quota example's numbers): a can use all 18 while b idles.
    adm = Admission((team("a", 9), team("b", 9)), (Cohort("c"),), Policies())
    a = adm.cq("a", "gpu")
    admit(adm, "a", 9)
    admit(adm, "a", 9)
    assert a.usage == 18 and a.borrowed == 9
    assert not adm.fits(a, 1)  # the cohort has nothing left
    assert not adm.fits(adm.cq("b", "gpu"), 1)  # b must reclaim (preemption) to use its own quota


def test_without_cohort_nominal_is_a_hard_limit():
    adm = Admission((team("a", 4, cohort=None), team("b", 4, cohort=None)), (), Policies())
    admit(adm, "a", 4)
    assert not adm.fits(adm.cq("a", "gpu"), 1)


def test_borrowing_limit_caps_what_a_queue_borrows():
    adm = Admission((team("a", 4, borrowing=2), team("b", 10)), (Cohort("c"),), Policies())
    a = adm.cq("a", "gpu")
    admit(adm, "a", 6)  # 4 nominal + 2 borrowed
    assert not adm.fits(a, 1)  # 7 > nominal + borrowingLimit even though b lends 10


def test_lending_limit_keeps_guaranteed_quota_out_of_the_cohort():
    # KEP-1224: b (nominal 10, lendingLimit 3) keeps 7 for itself; a can borrow at most 3 from it.
    adm = Admission((team("a", 2), team("b", 10, lending=3)), (Cohort("c"),), Policies())
    a, b = adm.cq("a", "gpu"), adm.cq("b", "gpu")
    admit(adm, "a", 5)  # 2 own + 3 borrowed
    assert not adm.fits(a, 1)
    assert adm.fits(b, 7)  # its guaranteed 7 is untouched by a's borrowing
    admit(adm, "b", 7)
    assert not adm.fits(b, 1)  # the rest of b's quota is lent out


def test_nested_cohorts_pool_at_the_root():
    # The platform renders cohorts with a parent and a weight, no cohort quotas: the tree is one pool.
    cohorts = (Cohort("org"), Cohort("ml", parent="org"), Cohort("web", parent="org"))
    adm = Admission((team("a", 2, cohort="ml"), team("b", 6, cohort="web")), cohorts, Policies())
    admit(adm, "a", 8)
    assert adm.cq("a", "gpu").borrowed == 6


def test_reclaim_within_cohort_any_evicts_the_borrower_regardless_of_priority():
    adm = Admission((team("a", 4), team("b", 4)), (Cohort("c"),), Policies())
    low = admit(adm, "a", 4, priority=0)
    high = admit(adm, "a", 4, priority=100, at=5)  # a borrows b's whole quota with a high-priority job
    b = adm.cq("b", "gpu")
    victims = adm.preemption_set(b, 2, priority=0)
    # Candidates from a borrowing queue, lowest priority first: one eviction of the low-priority job frees 4.
    assert victims == [low]
    assert high in a_workloads(adm, "a")


def a_workloads(adm: Admission, tenant: str) -> list:
    return list(adm.cq(tenant, "gpu").admitted.values())


def test_reclaim_lower_priority_spares_equal_priority_borrowers():
    policies = Policies(preemption=Preemption(reclaim_within_cohort="LowerPriority"))
    adm = Admission((team("a", 4), team("b", 4)), (Cohort("c"),), policies)
    admit(adm, "a", 8, priority=10)
    assert adm.preemption_set(adm.cq("b", "gpu"), 1, priority=10) is None
    assert adm.preemption_set(adm.cq("b", "gpu"), 1, priority=11) is not None


def test_borrow_within_cohort_evicts_only_lower_priority_borrowers():
    # b wants to borrow (beyond its nominal 2); a is borrowing with a low- and an equal-priority job.
    adm = Admission((team("a", 2), team("b", 2)), (Cohort("c"),), Policies())
    low = admit(adm, "a", 1, priority=1, at=1)
    admit(adm, "a", 1, priority=5, at=2)
    admit(adm, "a", 1, priority=5, at=3)
    admit(adm, "b", 1, priority=5)
    b = adm.cq("b", "gpu")
    assert not adm.fits(b, 1)  # 4 of 4 used
    # +2 would take b to 3 > nominal 2: borrowing, so only LowerPriority candidates count.
    assert adm.preemption_set(b, 2, priority=5) is None  # only one lower-priority job (1 unit) -- not enough
    assert adm.preemption_set(b, 1, priority=5) == [low]


def test_within_cluster_queue_lower_priority_and_newest_first():
    adm = Admission((team("a", 4, cohort=None),), (), Policies())
    old = admit(adm, "a", 2, priority=0, at=1)
    new = admit(adm, "a", 2, priority=0, at=2)
    a = adm.cq("a", "gpu")
    assert adm.preemption_set(a, 2, priority=0) is None  # equal priority: never
    assert adm.preemption_set(a, 2, priority=1) == [new]  # the most recently admitted goes first
    assert adm.preemption_set(a, 4, priority=1) == [new, old]


def test_preemption_set_is_minimal():
    # Greedy order would take the 1-unit job first; trimming drops it once the 4-unit eviction suffices.
    adm = Admission((team("a", 0), team("b", 5)), (Cohort("c"),), Policies())
    admit(adm, "a", 4, at=1)
    small = admit(adm, "a", 1, at=2)
    victims = adm.preemption_set(adm.cq("b", "gpu"), 4, priority=0)
    assert victims is not None and small not in victims and len(victims) == 1


def test_fair_sharing_orders_heads_by_share_and_preempts_the_bigger_borrower():
    policies = Policies(fair_sharing=True)
    adm = Admission((team("a", 4), team("b", 4), team("c", 4)), (Cohort("c"),), policies)
    big = admit(adm, "a", 8)  # a borrows all of c's 4 (share 4/12)
    admit(adm, "b", 4)
    a, b = adm.cq("a", "gpu"), adm.cq("b", "gpu")
    # b asks to borrow 2: its share would be 2/12 < a's 4/12, so a's workload is evictable.
    assert adm.preemption_set(b, 2, priority=0) == [big]
    # Ordering: with equal need to borrow, the queue with the lower share goes first.
    assert adm.order_key(b, 1, 0, 10.0, 1) < adm.order_key(a, 1, 0, 0.0, 2)


def test_fair_sharing_spares_a_borrower_with_a_smaller_share():
    policies = Policies(fair_sharing=True)
    adm = Admission((team("a", 4), team("b", 4), team("c", 8)), (Cohort("c"),), policies)
    admit(adm, "a", 6)  # share 2/16
    admit(adm, "b", 4)
    admit(adm, "c", 6)
    # b borrowing 4 would reach share 4/16 > a's 2/16: LessThanOrEqualToFinalShare forbids it.
    assert adm.preemption_set(adm.cq("b", "gpu"), 4, priority=0) is None


def test_without_fair_sharing_heads_within_nominal_go_first_then_priority_then_age():
    adm = Admission((team("a", 4), team("b", 4)), (Cohort("c"),), Policies())
    a, b = adm.cq("a", "gpu"), adm.cq("b", "gpu")
    admit(adm, "a", 4)
    assert adm.order_key(b, 2, 0, 50.0, 1) < adm.order_key(a, 2, 9, 0.0, 2)  # b within nominal beats a borrowing
    assert adm.order_key(a, 2, 9, 50.0, 3) < adm.order_key(a, 2, 0, 0.0, 4)


def test_fair_sharing_final_share_strategy_evicts_from_the_highest_share_queue():
    # Lendable pool 4 + 4 + 4 + 8 = 20. a borrows 4 (two 2-unit jobs, share 4/20), c borrows 2 (share 2/20).
    adm = Admission((team("a", 4), team("b", 4), team("c", 4), team("d", 8)), (Cohort("c"),),
                    Policies(fair_sharing=True))
    admit(adm, "a", 4, at=1)
    a_old = admit(adm, "a", 2, at=2)
    a_new = admit(adm, "a", 2, at=3)
    admit(adm, "c", 6, at=4)
    admit(adm, "d", 4, at=5)  # 8 + 6 + 4 + 2 (b, below) = all 20
    admit(adm, "b", 2, at=6)
    assert not adm.fits(adm.cq("b", "gpu"), 2)
    # b within nominal (2+2 <= 4) asks for 2: share with it = 0 <= a's share without a 2-unit job (2/20).
    # The highest-share queue is a; its newest job goes first.
    assert adm.preemption_set(adm.cq("b", "gpu"), 2, priority=0) == [a_new]
    assert a_old in adm.cq("a", "gpu").admitted.values()


def test_fair_sharing_ignores_borrow_within_cohort_and_respects_reclaim_policy():
    policies = Policies(fair_sharing=True, preemption=Preemption(reclaim_within_cohort="Never"))
    adm = Admission((team("a", 4), team("b", 4)), (Cohort("c"),), policies)
    admit(adm, "a", 8, priority=0)
    assert adm.preemption_set(adm.cq("b", "gpu"), 2, priority=100) is None


# -- the examples of Kueue v0.19.2 site/content/en/docs/concepts/cluster_queue.md, with their numbers ------

def fill(adm: Admission, tenant: str) -> int:
    """Admit 1-unit workloads into `tenant` until nothing more fits; how many fitted."""
    n = 0
    while adm.fits(adm.cq(tenant, "gpu"), 1):
        admit(adm, tenant, 1)
        n += 1
    return n


def test_kueue_borrowing_example_team_a_admits_21_while_team_b_is_idle():
    adm = Admission((team("team-a", 9, cohort="team-ab"), team("team-b", 12, cohort="team-ab")),
                    (Cohort("team-ab"),), Policies())
    assert fill(adm, "team-a") == 21
    # team-a has used all its nominal quota and borrows 12: team-b's pending workload goes first (it fits
    # within nominal quota) and reclaims by preemption.
    b = adm.cq("team-b", "gpu")
    assert adm.order_key(b, 1, 0, 99.0, 1) < adm.order_key(adm.cq("team-a", "gpu"), 1, 0, 0.0, 2)
    assert adm.preemption_set(b, 1, priority=0) is not None


def test_kueue_borrowing_limit_example():
    a_then_b = Admission((team("team-a", 9, cohort="team-ab", borrowing=1), team("team-b", 12, cohort="team-ab")),
                         (Cohort("team-ab"),), Policies())
    assert fill(a_then_b, "team-a") == 10  # 9 + 1
    b_alone = Admission((team("team-a", 9, cohort="team-ab", borrowing=1), team("team-b", 12, cohort="team-ab")),
                        (Cohort("team-ab"),), Policies())
    assert fill(b_alone, "team-b") == 21  # no borrowingLimit: 12 + 9


def test_kueue_lending_limit_example():
    lend_one = Admission((team("team-a", 9, cohort="team-ab"), team("team-b", 12, cohort="team-ab", lending=1)),
                         (Cohort("team-ab"),), Policies())
    assert fill(lend_one, "team-a") == 10  # 9 + the 1 team-b lends
    assert fill(lend_one, "team-b") == 11  # team-b's 12 - 1 lent is still its own
    lend_all = Admission((team("team-a", 9, cohort="team-ab"), team("team-b", 12, cohort="team-ab")),
                         (Cohort("team-ab"),), Policies())
    assert fill(lend_all, "team-b") == 21

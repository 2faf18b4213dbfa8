"""The next case of a run: the dtype in turn, a draw from the op's schema under the launcher's preconditions and
the launchable envelope; a draw that cannot be a case (a constraint the preconditions broke) is skipped, and too
many in a row are the declaration's fault (one clear line)."""

from __future__ import annotations

from typing import Mapping

from ..cases import Blocks, Case, contiguous_twin, generate
from ..envelope import DtypeEnvelopes
from ..errors import InvalidArgument
from ..rng import derive_seed
from .plan import Plan

MAX_UNFIT = 200  # draws in a row that the declared preconditions made invalid before the run gives up


class Drawer:
    """Draws the run's cases in order (case ``k`` from the run seed's ``k``-th derived seed)."""

    def __init__(self, plan: Plan, blocks: Blocks, envelope: DtypeEnvelopes) -> None:
        self.plan, self.blocks, self.envelope = plan, blocks, envelope
        self.active = list(plan.dtypes)
        self.index = 0  # draws so far (the next draw's seed index)
        self.flattened = 0  # cases made contiguous for a framework with no strides

    def next(self, long_rows: bool) -> Case:
        plan, spec, req = self.plan, self.plan.spec, self.plan.requires
        unfit = 0
        while True:
            dtype = self.active[self.index % len(self.active)]
            case_seed = derive_seed(plan.seed, self.index)
            self.index += 1
            case = req.apply(generate(plan.op, case_seed, dtype=dtype, strategy=plan.strategy, blocks=self.blocks,
                                      long_rows=long_rows, caps=capped(req.max_dims, self.envelope.caps_for(dtype))))
            # a dim rounded up to a declared divisor can break a constraint of the op: such a draw is skipped
            problem = spec.check_dims(case.dims, case.kwargs)
            if problem is None:
                break
            unfit += 1
            if unfit > MAX_UNFIT:
                raise InvalidArgument(f"{plan.target or plan.op}: the declared preconditions {req.to_dict()} leave no "
                                      f"valid {plan.op} shape ({problem}); relax them")
        case = within_value_cap(case, plan.device)
        if plan.framework != "torch" and not case.is_contiguous():  # same seed and values, dense (no strides there)
            case = contiguous_twin(case)
            self.flattened += 1
        return case

    def drop(self, dtype: str) -> None:
        """Draw no more cases of ``dtype`` (a dtype this run cannot judge)."""
        self.active.remove(dtype)


def within_value_cap(case: Case, device: str) -> Case:
    """``case`` with its largest values inside the device's value envelope (gpuemu.device_arith.value_cap): the
    parameters are recorded in the case, so it replays with the same bytes anywhere."""
    import dataclasses

    from ..cases import value_params
    from ..device_arith import value_cap

    cap = value_cap(case.op, device)
    if cap is None or case.values not in ("near_max", "past_fp16"):
        return case
    params = dict(case.value_params or value_params(case.values, case.spec, case.dtype, case.dims))
    if params.get("scale", 0.0) <= cap:
        return case
    return dataclasses.replace(case, value_params=dict(params, scale=cap))


def capped(declared: Mapping[str, int], envelope: Mapping[str, int]) -> dict[str, int]:
    """The size caps of the next draws: the launcher's declared ones and the envelope's, the smaller of each."""
    out = dict(declared)
    for d, c in envelope.items():
        out[d] = min(out.get(d, c), c)
    return out

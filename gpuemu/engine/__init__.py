"""The fuzz engine in phases, each a module: what one run of ``gpuemu.fuzz`` is made of.

- :mod:`.plan`: the run's settings resolved once (op or reference binding, dtypes, seed, policies, preconditions,
  time limits, device) into a :class:`~.plan.Plan`;
- :mod:`.generate`: the next case: the dtype in turn, a draw from the op's schema, the launcher's declared
  preconditions and the launchable envelope applied, draws that cannot be a case skipped;
- :mod:`.run`: the case run and judged by the oracle, under the case time limit;
- :mod:`.classify`: what the verdict counts as: PASS, a refusal, an undeclared precondition, a LIMIT, a failure;
- :mod:`.minimize`: the first failure of each class shrunk (:mod:`gpuemu.shrink`) and explained
  (:mod:`gpuemu.explain`);
- :mod:`.report`: stored (the failure store) with a replay line.

:func:`gpuemu.fuzzer.fuzz` is the short driver of these phases.
"""

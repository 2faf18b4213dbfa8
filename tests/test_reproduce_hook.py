"""`gpuemu reproduce SEED` dispatches a divergence stored by the hook to the hook's replay."""

from gpuemu import hook
from gpuemu.cli import main
from tests.test_hook import _rms_bug, _x, hooked, rms  # noqa: F401  (hooked is a fixture)


def test_cli_reproduces_a_hook_divergence(hooked, capsys):
    rt = hooked()
    x, w = _x()
    rms(_rms_bug, x, w)
    hook.uninstall()
    d = rt.divergences[0]
    rc = main(["reproduce", d.seed, "--store", str(rt.settings.store)])
    err = capsys.readouterr().err
    assert rc == 1
    assert "reproduced: same verdict" in err and d.seed in err

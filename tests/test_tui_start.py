"""How the app starts its first run: what --check starts early, it starts early too."""

from types import SimpleNamespace

from dldoctor.cli.check import _prefetching
from dldoctor.early import EARLY_PROBES, early_runs


class Host:
    """Keeps what it was asked to start early."""

    def __init__(self):
        self.early = None

    def prefetch(self, *, runs=(), probes=()):
        self.early = (tuple(runs), tuple(probes))


def test_the_first_run_gets_the_host_whose_probes_started_while_the_checks_load():
    made = []

    def make_host():
        made.append(Host())
        return made[-1]

    maker = _prefetching(SimpleNamespace(only=()), make_host)
    assert len(made) == 1 and made[0].early == (early_runs(), tuple(EARLY_PROBES))
    assert maker() is made[0]
    again = maker()  # a re-run asks the host afresh
    assert again is made[1] and again.early is None


def test_a_run_of_chosen_checks_starts_nothing_early():
    def make_host():
        raise AssertionError("no host is made before the run asks for one")

    assert _prefetching(SimpleNamespace(only=("gpu.count",)), make_host) is make_host
